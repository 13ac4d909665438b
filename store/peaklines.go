// The blocks live at a row's interval peak by allocating line
// (wire.PeakLines), made safe to keep.

package store

import (
	"slices"

	"github.com/gputop/gputop/wire"
)

// cleanPeakLines copies peak lines from outside: file and function names
// made printable and held to wire.MaxSettingBytes, at most
// wire.MaxPeakLines lines (the largest; the rest counted in More and
// MoreLines, as the agent counts those it leaves out).
func cleanPeakLines(p *wire.PeakLines) *wire.PeakLines {
	if p == nil {
		return nil
	}
	c := *p
	c.Skipped = clipText(CleanText(c.Skipped), wire.MaxSettingBytes)
	c.Lines = slices.Clone(c.Lines)
	slices.SortStableFunc(c.Lines, func(a, b wire.PeakLine) int {
		switch {
		case a.Bytes > b.Bytes:
			return -1
		case a.Bytes < b.Bytes:
			return 1
		}
		return 0
	})
	if len(c.Lines) > wire.MaxPeakLines {
		for _, l := range c.Lines[wire.MaxPeakLines:] {
			c.More += l.Bytes
			c.MoreLines++
		}
		c.Lines = slices.Clip(c.Lines[:wire.MaxPeakLines])
	}
	for i := range c.Lines {
		l := &c.Lines[i]
		l.File = clipText(CleanText(l.File), wire.MaxSettingBytes)
		l.Func = clipText(CleanText(l.Func), wire.MaxSettingBytes)
		l.Line = max(l.Line, 0)
		l.Blocks = max(l.Blocks, 0)
	}
	c.MoreLines = max(c.MoreLines, 0)
	return &c
}
