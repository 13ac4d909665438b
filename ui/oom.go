package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/wire"
)

// oomNote is the selected device's latest out-of-memory error: its table
// row (torch's counters and NVML used at that moment) and the agent's oom
// frame (the size asked for and the free memory torch saw).
type oomNote struct {
	Row   snapshot.Row
	OOM   wire.OOM
	Total uint64 // the device's memory, 0 when unknown
}

// latestOOM finds the last OOM row of device dev among rows and the frame
// behind it.
func latestOOM(rows []snapshot.Row, dev int, total uint64, frame func(pid int, t int64) (wire.OOM, bool)) *oomNote {
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if r.Dev != dev || r.Source != "oom" {
			continue
		}
		o, ok := frame(r.PID, r.T)
		if !ok {
			return nil
		}
		return &oomNote{Row: r, OOM: o, Total: total}
	}
	return nil
}

// explain says what the memory was doing when the allocation failed, each
// figure named with its source, and which of the usual causes the figures
// point to.
func (n *oomNote) explain(start int64) (head, body string) {
	o := n.OOM
	head = fmt.Sprintf("at %s in pid %d:", elapsed(time.Duration(n.Row.T-start)), n.Row.PID)
	if o.Requested > 0 {
		head += " asked for " + humanBytes(o.Requested)
		if o.Free > 0 {
			head += ", " + humanBytes(o.Free) + " free on the GPU (CUDA)"
		}
		head += "."
	}
	var unused, outside uint64
	if o.Reserved > o.Allocated {
		unused = o.Reserved - o.Allocated
	}
	parts := []string{fmt.Sprintf("torch held %s in tensors (allocated) and %s cached but unused (reserved − allocated)",
		humanBytes(o.Allocated), humanBytes(unused))}
	known := n.Row.NVMLUsed != nil
	if known && *n.Row.NVMLUsed > o.Reserved {
		outside = *n.Row.NVMLUsed - o.Reserved
		parts = append(parts, fmt.Sprintf("outside its cache %s (NVML used − reserved: CUDA context, other processes)",
			humanBytes(outside)))
	}
	var cause string
	switch {
	case n.Total > 0 && o.Requested > n.Total:
		cause = "That is more than the whole GPU (" + humanBytes(n.Total) + "): the size itself is wrong, or the work must be split."
	case o.Requested > 0 && o.Requested <= unused:
		cause = "The cache had room but no free block that large: fragmentation. " +
			"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."
	case known && outside > o.Allocated:
		cause = "More is used outside this process's tensors than by them: see the process pane."
	default:
		cause = "Live tensors fill the GPU: press h for what holds them, or use a smaller batch."
	}
	return head, strings.Join(parts, "; ") + ". " + cause
}
