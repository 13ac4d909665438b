// The key bar under the screen and the full help (?): both laid out to the
// terminal's width, so `? help` and `q quit` are always on screen.

package ui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"
)

const keySep = " • "

// keyBar draws the bindings in the order given, always ending with the
// bindings of always (help and quit): when the line is too narrow, the
// others are dropped from the end of want (the least important last), never
// the ones in always.
func keyBar(st help.Styles, want, always []key.Binding, w int) string {
	item := func(b key.Binding) string {
		return st.ShortKey.Render(b.Help().Key) + " " + st.ShortDesc.Render(b.Help().Desc)
	}
	var tail []string
	for _, b := range always {
		if b.Enabled() {
			tail = append(tail, item(b))
		}
	}
	var head []string
	for _, b := range want {
		if b.Enabled() {
			head = append(head, item(b))
		}
	}
	sep := st.ShortSeparator.Render(keySep)
	for n := len(head); n >= 0; n-- {
		line := strings.Join(append(append([]string(nil), head[:n]...), tail...), sep)
		if ansi.StringWidth(line) <= w {
			return line
		}
	}
	return truncate(strings.Join(tail, sep), w)
}

// helpEntry is one binding of the full help.
type helpEntry struct{ key, desc string }

// helpPages lays the full help out in columns that fill the width: the
// fewest rows whose columns fit in w, at most maxH rows a page; what does
// not fit on one page goes on the next.
func helpPages(st help.Styles, groups [][]key.Binding, w, maxH int) []string {
	var entries []helpEntry
	for _, g := range groups {
		for _, b := range g {
			if b.Enabled() {
				entries = append(entries, helpEntry{b.Help().Key, b.Help().Desc})
			}
		}
	}
	if len(entries) == 0 || maxH < 1 || w < 1 {
		return nil
	}
	const gap = 3
	// colWidths is the width of each column of rows entries from entries
	colWidths := func(es []helpEntry, rows int) []int {
		var ws []int
		for i := 0; i < len(es); i += rows {
			kw, dw := 0, 0
			for _, e := range es[i:min(i+rows, len(es))] {
				kw, dw = max(kw, ansi.StringWidth(e.key)), max(dw, ansi.StringWidth(e.desc))
			}
			ws = append(ws, kw+1+dw)
		}
		return ws
	}
	fits := func(ws []int) bool {
		t := 0
		for i, x := range ws {
			if i > 0 {
				t += gap
			}
			t += x
		}
		return t <= w
	}
	rows := len(entries)
	for r := 1; r <= len(entries); r++ {
		if fits(colWidths(entries, r)) {
			rows = r
			break
		}
	}
	rows = min(rows, maxH)
	var pages []string
	for len(entries) > 0 {
		// as many columns of rows entries as fit on this page (at least one)
		n := rows
		for n < len(entries) && fits(colWidths(entries[:min(n+rows, len(entries))], rows)) {
			n += rows
		}
		n = min(n, len(entries))
		pages = append(pages, helpPage(st, entries[:n], rows, w))
		entries = entries[n:]
	}
	return pages
}

// helpPage draws entries in columns of rows lines.
func helpPage(st help.Styles, es []helpEntry, rows, w int) string {
	lines := make([]string, min(rows, len(es)))
	for i := 0; i < len(es); i += rows {
		col := es[i:min(i+rows, len(es))]
		kw, dw := 0, 0
		for _, e := range col {
			kw, dw = max(kw, ansi.StringWidth(e.key)), max(dw, ansi.StringWidth(e.desc))
		}
		for j := range lines {
			cell := strings.Repeat(" ", kw+1+dw)
			if j < len(col) {
				cell = st.FullKey.Render(padRight(col[j].key, kw)) + " " + st.FullDesc.Render(padRight(col[j].desc, dw))
			}
			if i > 0 {
				lines[j] += "   "
			}
			lines[j] += cell
		}
	}
	for j := range lines {
		lines[j] = truncate(strings.TrimRight(lines[j], " "), w)
	}
	return strings.Join(lines, "\n")
}
