package ui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

// BenchmarkChartRender is the cost of drawing the chart at 160x50 when its
// data changed (the worst case of a frame).
func BenchmarkChartRender(b *testing.B) {
	m := New(ingest.New(newFixture()), Options{Now: fixedNow})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
	m = nm.(Model)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.chart.dirty = true
		_ = m.chart.View()
	}
}

// BenchmarkRefresh is the cost of recomputing every pane's data from the
// store for a frame whose window moved (chart data fetched and compared).
func BenchmarkRefresh(b *testing.B) {
	m := New(ingest.New(newFixture()), Options{Now: fixedNow})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
	m = nm.(Model)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.refresh(true)
	}
}

// liveModel is the fixture's model at 160x50, live, its clock at now,
// which the benchmark moves.
func liveModel() (Model, *store.Store, *time.Time) {
	st := newFixture()
	now := new(time.Time)
	*now = fixtureNow
	m := New(ingest.New(st), Options{Now: func() time.Time { return *now }})
	nm, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
	return nm.(Model), st, now
}

// BenchmarkFrameLive is one live frame at 160x50 with the window advancing
// 33 ms per frame: refresh, chart redraw when its columns changed, and View.
func BenchmarkFrameLive(b *testing.B) {
	m, _, now := liveModel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		*now = now.Add(33 * time.Millisecond)
		nm, _ := m.Update(tickMsg(*now))
		m = nm.(Model)
		_ = m.View()
	}
}
