package ui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// withRows is the fixture with n more rows from code, taken in
// its first seconds: before the chart's window, as most rows of a long run
// are.
func withRows(n int) *store.Store {
	st := newFixture()
	for i := range n {
		v := uint64(i)
		st.AgentMark(fixPID, wire.Mark{Type: wire.TypeMark, T: at(6*time.Second) + int64(i)*int64(time.Millisecond/4), Label: fmt.Sprint("row ", i),
			Devs: []wire.DevStats{{Dev: 0, Allocated: v, Reserved: v, Peak: v}}})
	}
	return st
}

// A frame that only new values make costs the same with 10,000 rows as with
// 100: nothing per row is done again until a row changes (the allocations
// of a redraw are its measure here; BenchmarkRefreshRows times it). Both
// are more rows than the table shows, so both draw the same table.
func TestValueFramesCostNothingPerRow(t *testing.T) {
	allocs := func(rows int) float64 {
		st := withRows(rows)
		now := fixtureNow
		m := New(ingest.New(st), Options{Now: func() time.Time { return now }})
		nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		m = nm.(Model)
		return testing.AllocsPerRun(20, func() {
			now = now.Add(time.Second) // a new value, past valueInterval
			st.AddNVML(0, now.UnixNano(), 3<<30, 0)
			nm, _ := m.Update(tickMsg(now))
			m = nm.(Model)
		})
	}
	few, many := allocs(100), allocs(10_000)
	if many > few+8 {
		t.Fatalf("a value frame allocates %.0f times with 10,000 rows, %.0f with 100: work per row is redone", many, few)
	}
}

// BenchmarkRefreshRows is a value-only frame's refresh with 10 and 10,000
// rows (the same cost is the goal).
func BenchmarkRefreshRows(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := withRows(n)
			now := fixtureNow
			m := New(ingest.New(st), Options{Now: func() time.Time { return now }})
			nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
			m = nm.(Model)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Second)
				st.AddNVML(0, now.UnixNano(), 3<<30, 0)
				nm, _ := m.Update(tickMsg(now))
				m = nm.(Model)
			}
		})
	}
}
