package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

func bar(t int64, id uint64, label string, parts map[string]uint64) present.LedgerBar {
	var ps []summary.Part
	for _, name := range summary.PartNames() {
		ps = append(ps, summary.Part{Name: name, Short: strings.ToUpper(name[:1]), Title: name, Bytes: parts[name], Known: true})
	}
	return present.LedgerBar{T: t, ID: id, Label: label, Ledger: summary.Ledger{Parts: ps}}
}

// The stacked view draws each bar at its row's time, params at the bottom
// in the ledger bar's colour, the top part at the top, its height in
// proportion (one bar twice the other's total is twice as high); the
// legend gives the selected bar's figures; a row chosen that is not in
// the window falls back to the newest bar at the cursor.
func TestStackedBars(t *testing.T) {
	st := DefaultStyles()
	c := newChart(&st)
	c.SetSize(60, 14)
	sec := int64(time.Second)
	bars := []present.LedgerBar{
		bar(2*sec, 1, "step 1", map[string]uint64{wire.PartParams: 1 * gib, wire.PartOptimizer: 1 * gib}),
		bar(6*sec, 2, "step 2", map[string]uint64{wire.PartParams: 1 * gib, wire.PartOptimizer: 1 * gib, wire.PartActivations: 2 * gib}),
	}
	sel, why := pickLedgerBar(bars, 99, true, 10*sec)
	if sel != 1 || why != "newest row at the cursor" {
		t.Fatalf("a selected row without a bar: bar %d (%s), want the newest, 1", sel, why)
	}
	if sel, why = pickLedgerBar(bars, 1, true, 10*sec); sel != 0 || why != "selected row" {
		t.Fatalf("the selected row's bar: %d (%s), want 0", sel, why)
	}
	c.SetData(chartData{From: 0, To: 10 * sec, Window: 10 * time.Second, Ledger: ledgerView{On: true, Bars: bars, Sel: sel, Why: why}})
	out := c.View()
	lines := strings.Split(out, "\n")
	plain := strings.Split(ansi.Strip(out), "\n")
	// the plot: rows 1 .. up to the X axis
	var axis int
	for i, l := range plain {
		if strings.Contains(l, "└") {
			axis = i
		}
	}
	if axis == 0 {
		t.Fatalf("no X axis:\n%s", ansi.Strip(out))
	}
	height := func(col int) int {
		n := 0
		for y := axis - 1; y >= 1; y-- {
			if r := []rune(plain[y]); col < len(r) && strings.ContainsRune("▁▂▃▄▅▆▇█", r[col]) {
				n++
			}
		}
		return n
	}
	x0 := strings.IndexRune(plain[axis], '└')
	gw := 60 - yLabelW - 1
	c1, c2 := x0+1+int(2*int64(gw)/10), x0+1+int(6*int64(gw)/10)
	h1, h2 := height(c1), height(c2)
	if h1 == 0 || h2 < 2*h1-1 || h2 > 2*h1+1 {
		t.Errorf("bar heights %d and %d, want the second twice the first:\n%s", h1, h2, ansi.Strip(out))
	}
	// a style's escape codes, as the chart writes them before a run of cells
	codes := func(part string) string {
		before, _, _ := strings.Cut(st.LedgerPart[part].Render("\x00"), "\x00")
		return before
	}
	if codes(wire.PartParams) == "" || codes(wire.PartParams) == codes(wire.PartActivations) {
		t.Fatalf("the parts have no colours of their own: %q, %q", codes(wire.PartParams), codes(wire.PartActivations))
	}
	if !strings.Contains(lines[axis-1], codes(wire.PartParams)) {
		t.Errorf("the bottom row has no params colour: %q", lines[axis-1])
	}
	top := axis - h2
	if !strings.Contains(lines[top], codes(wire.PartActivations)) {
		t.Errorf("the second bar's top is not activations' colour: %q", lines[top])
	}
	legend := strings.Join(plain[axis+2:], " ")
	if !strings.Contains(legend, `ledger "step 1": █P 1.00 GiB █G 0 B █O 1.00 GiB █A 0 B`) {
		t.Errorf("legend %q, want step 1's figures", legend)
	}
}
