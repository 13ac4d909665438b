package ui

import (
	"io"
	"testing"
	"time"

	uv "github.com/charmbracelet/ultraviolet"
)

// BenchmarkValueFrame is one live frame that new values make at 160x50,
// from the tick to the frame's text: the store's columns, each pane's data
// and drawing (Bubble Tea's renderer then parses the text into cells and
// diffs it against the screen, about 3 times this on the same machine,
// for each frame whose text changed).
func BenchmarkValueFrame(b *testing.B) {
	m, st, now := liveModel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		*now = now.Add(time.Second)
		st.AddNVML(0, now.UnixNano(), 3<<30+uint64(i%7)<<28, 0)
		nm, _ := m.Update(tickMsg(*now))
		m = nm.(Model)
		_ = m.View()
	}
	if m.Stats().Frames < b.N {
		b.Fatalf("%d frames for %d new values", m.Stats().Frames, b.N)
	}
}

// BenchmarkRendererFrame is what Bubble Tea's renderer does with each of
// those frames, as its flush does: the cell buffer cleared, the frame's
// text parsed into it, the lines diffed against the last frame's and the
// changes written. Its cost is the floor of a live frame's, whatever the
// panes do: on the H200 it was about a third of the live TUI's Go side.
func BenchmarkRendererFrame(b *testing.B) {
	m, st, now := liveModel()
	frames := make([]string, 8) // new values each: the chart moves, as live
	for i := range frames {
		*now = now.Add(time.Second)
		st.AddNVML(0, now.UnixNano(), 3<<30+uint64(i%7)<<28, 0)
		nm, _ := m.Update(tickMsg(*now))
		m = nm.(Model)
		frames[i] = m.View().Content
	}
	if frames[0] == frames[1] {
		b.Fatal("the frames are the same: nothing for the renderer to diff")
	}
	buf := uv.NewScreenBuffer(160, 50)
	r := uv.NewTerminalRenderer(io.Discard, nil)
	b.SetBytes(int64(len(frames[0])))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Clear()
		uv.NewStyledString(frames[i%len(frames)]).Draw(buf, buf.Bounds())
		r.Render(buf.RenderBuffer)
		if err := r.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
