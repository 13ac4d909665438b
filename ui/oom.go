package ui

import (
	"strconv"
	"time"

	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/wire"
)

// oomNote is the selected device's latest out-of-memory error: its table
// row (torch's counters and NVML used at that moment), the agent's oom
// frame (the size asked for and the free memory torch saw) and the
// device's memory.
type oomNote struct {
	Row   snapshot.Row
	OOM   wire.OOM
	Total uint64 // 0 when unknown
}

// latestOOM finds the last OOM row of device dev among rows and the frame
// behind it.
func latestOOM(rows []snapshot.Row, dev int, total uint64, ooms snapshot.OOMLookup) *oomNote {
	r, o, ok := snapshot.LatestOOM(rows, dev, ooms)
	if !ok {
		return nil
	}
	return &oomNote{Row: r, OOM: o, Total: total}
}

// explain is the note's first line (when and what was asked for) and the
// rest: the likely cause first, so a short pane keeps it, then where the
// memory was.
func (n *oomNote) explain(start int64) (head, body string) {
	e := snapshot.ExplainOOM(n.Row, n.OOM, n.Total)
	head = "at " + elapsed(time.Duration(n.Row.T-start)) + " in pid " + strconv.Itoa(n.Row.PID) + ":"
	if e.Asked != "" {
		head += " " + e.Asked
	}
	return head, e.Cause + " " + e.Where
}
