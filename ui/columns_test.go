package ui

import (
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/summary"
)

// A column added to summary.Columns with a TUI place and a Detail shows
// in the summary table at its place and in the selected row's details,
// with no change here (ARCHITECTURE.md's "A summary column").
func TestAColumnAddedToTheListShowsInTheTable(t *testing.T) {
	free := func(r summary.Row, _ *summary.Context) string {
		if r.Reserved == nil || r.Allocated == nil {
			return dash
		}
		return summary.MiB(*r.Reserved - *r.Allocated)
	}
	old := summary.Columns
	summary.Columns = append(slices.Clip(old), summary.Column{Name: "test_cached_free_mb", Origin: summary.OriginDerived,
		Value:  summary.Value{Unit: summary.UnitMiB, CSV: free, Cell: free},
		TUI:    &summary.TUICol{Title: "CACHED FREE MiB", Place: 85, Right: true, Priority: 3},
		Detail: "cached free (MiB)"})
	t.Cleanup(func() { summary.Columns = old })

	m := newModel(t, newFixture(), Options{}, 160, 50)
	tbl := ansi.Strip(m.table.View())
	head, _, _ := strings.Cut(tbl, "\n")
	if !strings.Contains(head, "NVML USED MiB  CACHED FREE MiB  NVML PEAK SINCE PREV MiB") {
		t.Fatalf("the column should sit between NVML used and NVML peak:\n%s", tbl)
	}
	if !strings.Contains(tbl, "   1.75  ") {
		t.Errorf("Training start's cached free (2 MiB reserved, 256 KiB allocated) should be 1.75:\n%s", tbl)
	}
	m = send(t, m, press("tab", "g")...)
	if tbl = ansi.Strip(m.table.View()); !strings.Contains(tbl, "selected row 1 of 6: Training start") ||
		!strings.Contains(tbl+"\n", "\n  cached free (MiB) 1.75\n") {
		t.Errorf("the selected row's details should give the column's value:\n%s", tbl)
	}
	// a narrow terminal drops it first (the lowest priority but Δ NVML's)
	m = newModel(t, newFixture(), Options{}, 80, 24)
	if tbl = ansi.Strip(m.table.View()); strings.Contains(tbl, "CACHED FREE") {
		t.Errorf("at 80 columns the column should be dropped:\n%s", tbl)
	}
}
