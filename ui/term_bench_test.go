package ui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
)

// BenchmarkValueFrame is one live frame that new values make at 160x50,
// from the tick to the frame's text: the store's columns, each pane's data
// and drawing (Bubble Tea's renderer then parses the text into cells and
// diffs it against the screen, about 3 times this on the same machine,
// for each frame whose text changed).
func BenchmarkValueFrame(b *testing.B) {
	st := newFixture()
	now := fixtureNow
	m := New(ingest.New(st), Options{Now: func() time.Time { return now }})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
	m = nm.(Model)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		st.AddNVML(0, now.UnixNano(), 3<<30+uint64(i%7)<<28, 0)
		nm, _ := m.Update(tickMsg(now))
		m = nm.(Model)
		_ = m.View()
	}
	if m.Stats().Frames < b.N {
		b.Fatalf("%d frames for %d new values", m.Stats().Frames, b.N)
	}
}
