// The selected row's ledger under the table: a stacked bar of what the
// process's memory was made of (each part's letter where its stretch
// starts), the figures with what they are based on, the peak of the
// interval before the row broken down, and the advice from them.

package ui

import (
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// ledgerPartStyles colour the ledger's parts, by wire's part name: torch's
// tensors in cool colours, what is no tensor's in warm ones, the cache
// and what is outside torch dim.
func ledgerPartStyles() map[string]lipgloss.Style {
	c := lipgloss.Color
	return map[string]lipgloss.Style{
		wire.PartParams:       lipgloss.NewStyle().Foreground(c("#5F87FF")),
		wire.PartGrads:        lipgloss.NewStyle().Foreground(c("#AF87FF")),
		wire.PartOptimizer:    lipgloss.NewStyle().Foreground(c("#FF87D7")),
		wire.PartActivations:  lipgloss.NewStyle().Foreground(c("#FFAF00")),
		wire.PartOtherTensors: lipgloss.NewStyle().Foreground(c("#00D7AF")),
		wire.PartWorkspace:    lipgloss.NewStyle().Foreground(c("#AFAF87")),
		wire.PartUnattributed: lipgloss.NewStyle().Foreground(c("#FF5F5F")),
		wire.PartCachedFree:   lipgloss.NewStyle().Foreground(c("#6C6C6C")),
		wire.PartOutsideTorch: lipgloss.NewStyle().Foreground(c("#D7D75F")),
	}
}

// ledgerWide is the width from which the figures name each part in words
// (below it, by the bar's letter).
const ledgerWide = 120

// ledgerLines are the selected row's ledger lines (none when no row is
// selected, or it is of no agent process).
func (m *summaryModel) ledgerLines() []string {
	head, rest := m.ledgerParts()
	return append(head, rest...)
}

// ledgerParts are ledgerLines as its stacked bar and figures (when the
// row has a ledger: a short pane shows them right after the row's
// details) and the rest.
func (m *summaryModel) ledgerParts() (head, rest []string) {
	r, ok := m.Selected()
	if !ok || r.PID == 0 {
		return nil, nil
	}
	st := m.styles
	var out []string
	if l, ok := summary.LedgerOf(r); ok {
		head = append([]string{m.ledgerBar(l)}, m.indented(m.ledgerFigures(l))...)
	} else if n := summary.LedgerNote(r); n != "" {
		out = append(out, m.indented(st.Dim.Render(printable.Clean(n)))...)
	}
	if k := r.IntervalPeak; k != nil {
		out = append(out, m.indented(printable.Clean(summary.PeakText(*k)))...)
	}
	if p := r.PeakLines; p != nil {
		out = append(out, m.indented(printable.Clean(summary.PeakLinesText(*p, r.T)))...)
	}
	for _, a := range summary.Advice(r) {
		out = append(out, m.indented(st.Warn.Render("advice:")+" "+printable.Clean(a))...)
	}
	return head, out
}

// indented wraps s to the pane's width, every line two cells in.
func (m *summaryModel) indented(s string) []string {
	lines := wrapTo(s, max(m.w-2, 1))
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return lines
}

// ledgerBar is "  ledger P███G██O████A…X█ = 6.63 GiB, NVML (process)":
// the parts side by side in proportion to what they add up to.
func (m *summaryModel) ledgerBar(l summary.Ledger) string {
	st := m.styles
	total, whole := l.Total()
	sum := units.Bytes(total) + " NVML (process)"
	if !whole {
		sum = units.Bytes(total) + " torch reserved"
	}
	head := "  " + st.Bold.Render("ledger") + " "
	tail := " = " + sum
	width := max(m.w-lipgloss.Width(head)-lipgloss.Width(tail), 9)
	var b strings.Builder
	for i, n := range barCells(l, total, width) {
		if n == 0 {
			continue
		}
		p := l.Parts[i]
		b.WriteString(st.LedgerPart[p.Name].Render(p.Short + strings.Repeat("█", n-1)))
	}
	return truncate(head+b.String()+tail, m.w)
}

// barCells shares width cells among the ledger's known parts in
// proportion to their bytes (of total): every part with bytes gets at
// least one cell (its letter) where width allows, the largest the rest.
func barCells(l summary.Ledger, total uint64, width int) []int {
	cells := make([]int, len(l.Parts))
	if total == 0 {
		return cells
	}
	used, largest := 0, -1
	for i, p := range l.Parts {
		if !p.Known || p.Bytes == 0 {
			continue
		}
		n := int(float64(p.Bytes) / float64(total) * float64(width))
		cells[i] = max(n, 1)
		used += cells[i]
		if largest < 0 || p.Bytes > l.Parts[largest].Bytes {
			largest = i
		}
	}
	if largest >= 0 {
		cells[largest] = max(cells[largest]+width-used, 1)
	}
	return cells
}

// ledgerFigures are the parts' figures, each after its letter in its
// colour ("P params 1.00 GiB" from ledgerWide cells, "P 1.00 GiB" below),
// then what they are based on.
func (m *summaryModel) ledgerFigures(l summary.Ledger) string {
	st := m.styles
	wide := m.w >= ledgerWide
	var figs []string
	for _, p := range l.Parts {
		name := st.LedgerPart[p.Name].Render(p.Short)
		if wide {
			name += " " + p.Title
		}
		v := humanBytes(p.Bytes)
		if !p.Known {
			v = "unknown"
		}
		if p.Name == wire.PartCachedFree && wide {
			if s := summary.CachedFreeSplit(l); s != "" {
				v += " (" + s + ")"
			}
		}
		figs = append(figs, name+" "+v)
	}
	src := summary.LedgerBasis(l, func(t int64) string { return elapsed(time.Duration(t - m.d.Start)) }, wide)
	return strings.Join(figs, " ") + " " + st.Dim.Render("["+printable.Clean(src)+"]")
}
