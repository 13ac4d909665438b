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

// legend names each series with its source and, when there is room, its
// value at the cursor; narrower, it groups the torch series under one label.
func (c *chartModel) legend() string {
	st := c.styles
	note := ""
	if c.data.Note != "" {
		note = st.Dim.Render(c.data.Note)
	}
	join := func(parts []string, sep string) string {
		if note != "" {
			parts = append(parts, note)
		}
		return strings.Join(parts, sep)
	}
	var full []string
	for _, s := range c.data.Series {
		p := s.Style.Render("━━") + " " + s.Name
		if s.Now != nil {
			p += " " + st.Bold.Render(humanBytes(*s.Now))
		}
		full = append(full, p)
	}
	if l := join(full, "   "); lipgloss.Width(l) <= c.w {
		return l
	}
	// compact: "━ NVML used (driver)  torch: ━ reserved ━ peak ━ allocated"
	var compact, torch []string
	for _, s := range c.data.Series {
		name, src, ok := strings.Cut(s.Name, " (")
		if ok && src == "torch)" {
			torch = append(torch, s.Style.Render("━")+" "+name)
			continue
		}
		compact = append(compact, s.Style.Render("━")+" "+s.Name)
	}
	if len(torch) > 0 {
		compact = append(compact, "torch: "+strings.Join(torch, " "))
	}
	return join(compact, "  ")
}
