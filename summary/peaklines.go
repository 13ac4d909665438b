// The blocks live at a row's interval peak by allocating line, in words.

package summary

import (
	"fmt"
	"strings"
	"time"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// PeakLinesText says what was live at the highest point since the
// process's previous row, by the line that allocated it: "blocks live at
// the peak (6.10 GiB, 1.2 s before the row), by allocating line: 4.00 GiB
// in 12 blocks train.py:45 forward; …". row is the row's time.
func PeakLinesText(p wire.PeakLines, row int64) string {
	if p.Skipped != "" {
		return "no blocks by line at the peak: " + p.Skipped
	}
	when := "at the row"
	if p.T != 0 && p.T < row {
		when = fmt.Sprintf("%s before the row", time.Duration(row-p.T).Round(time.Millisecond))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "blocks live at the peak (%s, %s), by allocating line:", units.Bytes(p.Allocated), when)
	for i, l := range p.Lines {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s in %s %s:%d %s", units.Bytes(l.Bytes), plural(l.Blocks, "block"), l.File, l.Line, l.Func)
	}
	if p.MoreLines > 0 {
		fmt.Fprintf(&b, "; %s more: %s", plural(p.MoreLines, "line"), units.Bytes(p.More))
	}
	if p.Unknown > 0 {
		fmt.Fprintf(&b, "; %s allocated before the history's first entry (no line known)", units.Bytes(p.Unknown))
	}
	if len(p.Lines) == 0 && p.MoreLines == 0 && p.Unknown == 0 {
		b.WriteString(" none")
	}
	return b.String()
}
