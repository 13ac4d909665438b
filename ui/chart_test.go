package ui

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
)

func TestDotRowMapping(t *testing.T) {
	const dots = 40
	if got := dotRow(0, 8*gib, dots); got != dots-1 {
		t.Errorf("0 maps to row %d, want the bottom row %d", got, dots-1)
	}
	if got := dotRow(8*gib, 8*gib, dots); got != 0 {
		t.Errorf("the axis top maps to row %d, want 0", got)
	}
	if got := dotRow(16*gib, 8*gib, dots); got != 0 {
		t.Errorf("a value above the axis top maps to row %d, want it clamped to 0", got)
	}
	if a, b := dotRow(2*gib, 8*gib, dots), dotRow(6*gib, 8*gib, dots); a <= b {
		t.Errorf("a larger value must be drawn higher (smaller row): 2G->%d 6G->%d", a, b)
	}
}

func TestColumnSpansShowMaxAndConnect(t *testing.T) {
	const dots = 40
	maxY := float64(8 * gib)
	base := uint64(1 * gib)
	cols := []store.Column{
		{Min: base, Max: base, Last: base, OK: true},
		{Min: base, Max: 5 * gib, Last: base, OK: true}, // a spike inside one column
		{Min: base, Max: base, Last: base, OK: true},
		{}, // no sample: holds the previous value
		{Min: 3 * gib, Max: 3 * gib, Last: 3 * gib, OK: true}, // a step up
		{}, // trailing: nothing known yet
	}
	sp := columnSpans(cols, nil, maxY, dots)
	if !sp[1].OK || sp[1].Top >= sp[0].Top || sp[1].Top >= sp[2].Top {
		t.Errorf("the spike column top %d should be above its neighbours %d, %d", sp[1].Top, sp[0].Top, sp[2].Top)
	}
	if sp[1].Top != dotRow(5*gib, maxY, dots) || sp[1].Bottom != dotRow(base, maxY, dots) {
		t.Errorf("the spike column spans %d..%d, want Max..Min = %d..%d", sp[1].Top, sp[1].Bottom, dotRow(5*gib, maxY, dots), dotRow(base, maxY, dots))
	}
	if !sp[3].OK || sp[3].Top != dotRow(base, maxY, dots) {
		t.Errorf("an empty column between samples should hold the last value, got %+v", sp[3])
	}
	if sp[4].Bottom != dotRow(base, maxY, dots) || sp[4].Top != dotRow(3*gib, maxY, dots) {
		t.Errorf("a step should be connected to the previous Last: got %d..%d", sp[4].Top, sp[4].Bottom)
	}
	if sp[5].OK {
		t.Errorf("nothing may be drawn after the last sample")
	}
	hold := uint64(2 * gib)
	sp = columnSpans([]store.Column{{}, {}, {Min: 2 * gib, Max: 2 * gib, Last: 2 * gib, OK: true}}, &hold, maxY, dots)
	if !sp[0].OK || sp[0].Top != dotRow(hold, maxY, dots) {
		t.Errorf("the value at the window's left edge should be held until the first sample, got %+v", sp[0])
	}
	if got := columnSpans(make([]store.Column, 5), nil, maxY, dots); got[0].OK || got[4].OK {
		t.Errorf("a series with no samples must draw nothing (never zeros)")
	}
}

// spikeStore has an hour of NVML samples at 10 Hz around 1 GiB and, half way,
// one 5 ms spike of +4 GiB sampled at 1 kHz.
func spikeStore() (*store.Store, int64) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	spike := at(30 * time.Minute)
	for ms := int64(0); ms <= int64(time.Hour/time.Millisecond); ms += 100 {
		t := t0 + ms*int64(time.Millisecond)
		st.AddNVML(0, t, 1*gib+uint64(ms%7)*mib, 0)
		if t == spike {
			for k := int64(1); k <= 5; k++ {
				st.AddNVML(0, t+k*int64(time.Millisecond), 5*gib, 0)
			}
			st.AddNVML(0, t+6*int64(time.Millisecond), 1*gib, 0)
		}
	}
	return st, spike
}

// topRows finds, for each cell column of the plot, the highest row holding a
// braille dot (-1 for none).
func topRows(chart string, x0, gw int) []int {
	lines := strings.Split(chart, "\n")
	top := make([]int, gw)
	for i := range top {
		top[i] = -1
	}
	for y, l := range lines {
		r := []rune(l)
		for x := 0; x < gw && x0+x < len(r); x++ {
			if c := r[x0+x]; c > 0x2800 && c <= 0x28FF && top[x] < 0 {
				top[x] = y
			}
		}
	}
	return top
}

func TestSpikeVisibleInAnHourWindow(t *testing.T) {
	st, spike := spikeStore()
	now := at(time.Hour)
	m := newModel(t, st, Options{Now: func() time.Time { return time.Unix(0, now) }}, 160, 40)
	m = send(t, m, press("-", "-", "-")...) // 1m -> 5m -> 15m -> 1h
	if zooms[m.tl.zoom] != time.Hour {
		t.Fatalf("zoom is %v, want 1h", zooms[m.tl.zoom])
	}
	d := m.chart.data
	if spike < d.From || spike >= d.To {
		t.Fatalf("the spike at %d is outside the window %d..%d", spike, d.From, d.To)
	}
	gw := m.chart.graphWidth()
	x := int((spike - d.From) * int64(gw) / (d.To - d.From))
	out := m.chart.View()
	// the canvas starts on the chart's second line (the first holds marker labels)
	canvasLines := strings.Join(strings.Split(out, "\n")[1:], "\n")
	tops := topRows(stripANSI(canvasLines), yLabelW+1, gw)
	if tops[x] < 0 {
		t.Fatalf("nothing drawn at the spike's column %d", x)
	}
	var others []int
	for i, r := range tops {
		if r >= 0 && (i < x-1 || i > x+1) {
			others = append(others, r)
		}
	}
	sort.Ints(others)
	median := others[len(others)/2]
	if tops[x] >= median-3 {
		t.Errorf("the 5 ms spike at column %d reaches row %d, not clearly above the other columns (median top row %d)", x, tops[x], median)
	}
	// the columns are min/max aggregates: the spike's column holds the spike
	cols := st.Columns(store.Key{Dev: 0, Metric: store.NVMLUsed}, d.From, d.To, m.chart.Columns())
	found := false
	for _, c := range cols {
		if c.OK && c.Max == 5*gib {
			found = true
		}
	}
	if !found {
		t.Errorf("no chart column of the 1 h window has the spike's 5 GiB as its max")
	}
}

func TestMarkerLineFitsAndSkipsCrowdedLabels(t *testing.T) {
	st := DefaultStyles()
	l := markerLine([]markLabel{{2, "Training start", st.MarkSnapshot}, {4, "Epoch 5", st.MarkSnapshot}, {30, "After cleanup", st.MarkOOM}}, 40)
	plain := stripANSI(l)
	if strings.Contains(plain, "Training start") {
		t.Errorf("a label with no room before the next marker should be dropped: %q", plain)
	}
	if !strings.Contains(plain, "Epoch 5") || !strings.Contains(plain, "After cle") {
		t.Errorf("labels missing: %q", plain)
	}
	if w := len([]rune(plain)); w > 40 {
		t.Errorf("marker line is %d wide, want <= 40", w)
	}
}
