// The chart's text lines: the markers' labels above it and the legend
// below it.

package ui

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// markLabel is a marker's label at a screen column.
type markLabel struct {
	x    int
	text string
	st   lipgloss.Style
}

// markerLine places each marker's label above its line, shortening a label
// that would run into the next one and dropping one with no room at all.
func markerLine(labels []markLabel, w int) string {
	var sb strings.Builder
	col, pos := 0, 0 // first column free for a label (one space after the last); width written
	for i, l := range labels {
		start := max(l.x, col)
		end := w
		if i+1 < len(labels) && labels[i+1].x > start {
			end = min(end, labels[i+1].x-1)
		}
		tw := lipgloss.Width(l.text)
		if end-start < min(tw, 8) {
			// no room on the right (e.g. a snapshot just taken, at the
			// right edge): end the label at its marker instead
			if s2 := max(col, l.x+1-tw); l.x+1-s2 > end-start {
				start, end = s2, l.x+1
			}
		}
		if end-start < 3 {
			continue
		}
		t := truncate(l.text, end-start)
		sb.WriteString(strings.Repeat(" ", start-pos))
		sb.WriteString(l.st.Render(t))
		pos = start + lipgloss.Width(t)
		col = pos + 1
	}
	return sb.String()
}

// shortNames are the legend's names for its narrowest forms.
var shortNames = map[string]string{"NVML used": "NVML", "reserved": "res", "allocated": "alloc", "largest free block": "largest free"}

// legend names each series with its source and its value at the cursor.
// Narrower, it groups the torch series under one label, then shortens the
// names, then leaves out the note; the values stay in every form.
func (c *chartModel) legend() string {
	st := c.styles
	note := ""
	if c.data.Note != "" {
		note = st.Dim.Render(c.data.Note)
	}
	value := func(s *chartSeries) string {
		if s.Now == nil {
			return ""
		}
		return " " + st.Bold.Render(humanBytes(*s.Now))
	}
	join := func(parts []string, sep string, withNote bool) string {
		if withNote && note != "" {
			parts = append(parts, note)
		}
		return strings.Join(parts, sep)
	}
	var full []string
	for i := range c.data.Series {
		s := &c.data.Series[i]
		full = append(full, s.Style.Render("━━")+" "+s.Name+value(s))
	}
	if l := join(full, "   ", true); lipgloss.Width(l) <= c.w {
		return l
	}
	// grouped: "━ NVML used 2.49 GiB  torch: ━ reserved 1.50 GiB ━ peak …",
	// then with short names: "━ NVML 2.49 GiB  torch: ━ res 1.50 GiB …";
	// each series an item, the first torch one labelled "torch:"
	items := func(short bool) (out []string, torch int) {
		var ts []string
		for i := range c.data.Series {
			s := &c.data.Series[i]
			name, src, ok := strings.Cut(s.Name, " (")
			if short {
				if n, ok := shortNames[name]; ok {
					name = n
				}
			} else if _, how, ok := strings.Cut(src, ", "); ok {
				name += " (" + how // what the torch label leaves out: "read ~1/s)"
			}
			if ok && strings.HasPrefix(src, "torch") {
				ts = append(ts, s.Style.Render("━")+" "+name+value(s))
				continue
			}
			out = append(out, s.Style.Render("━")+" "+name+value(s))
		}
		if len(ts) > 0 {
			ts[0] = "torch: " + ts[0]
		}
		return append(out, ts...), len(out)
	}
	grouped := func(short bool) []string {
		all, n := items(short)
		if n == len(all) {
			return all
		}
		return append(all[:n:n], strings.Join(all[n:], " "))
	}
	long, short := grouped(false), grouped(true)
	for _, l := range []string{join(long, "  ", true), join(short, "  ", true), join(short, "  ", false), join(short, " ", false)} {
		if lipgloss.Width(l) <= c.w {
			return l
		}
	}
	// narrower still: the short names on as many lines as they take, a
	// series never parted from its value
	var lines []string
	line := ""
	all, _ := items(true)
	for _, it := range all {
		switch {
		case line == "":
			line = it
		case lipgloss.Width(line+" "+it) <= c.w:
			line += " " + it
		default:
			lines = append(lines, line)
			line = it
		}
	}
	return strings.Join(append(lines, line), "\n")
}
