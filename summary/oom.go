package summary

import (
	"fmt"
	"strings"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// LatestOOM finds the last OOM row of device dev among rows and the oom
// frame it carries.
func LatestOOM(rows []Row, dev int) (Row, wire.OOM, bool) {
	for i := len(rows) - 1; i >= 0; i-- {
		if r := rows[i]; r.Dev == dev && r.OOM != nil {
			return r, *r.OOM, true
		}
	}
	return Row{}, wire.OOM{}, false
}

// OOMExplanation says what the memory was doing when an allocation failed,
// each figure named with its source, and which of the usual causes the
// figures point to.
type OOMExplanation struct {
	Asked string // "asked for 4.00 GiB, 1.20 GiB free on the GPU (CUDA)."
	Where string // torch's allocated and cached-but-unused bytes, NVML outside torch's cache
	Cause string
}

// ExplainOOM explains an OOM row r and its frame o on a device of total
// bytes (0 when unknown).
func ExplainOOM(r Row, o wire.OOM, total uint64) OOMExplanation {
	var e OOMExplanation
	if o.Requested > 0 {
		e.Asked = "asked for " + units.Bytes(o.Requested)
		if o.Free > 0 {
			e.Asked += ", " + units.Bytes(o.Free) + " free on the GPU (CUDA)"
		}
		e.Asked += "."
	}
	var unused, outside uint64
	if o.Reserved > o.Allocated {
		unused = o.Reserved - o.Allocated
	}
	parts := []string{fmt.Sprintf("torch held %s in tensors (allocated) and %s cached but unused (reserved − allocated)",
		units.Bytes(o.Allocated), units.Bytes(unused))}
	known := r.NVMLUsed != nil
	if known && *r.NVMLUsed > o.Reserved {
		outside = *r.NVMLUsed - o.Reserved
		parts = append(parts, fmt.Sprintf("on the whole GPU %s outside its cache (NVML device used − reserved: CUDA contexts, other processes)",
			units.Bytes(outside)))
	}
	e.Where = strings.Join(parts, "; ") + "."
	// what a memory fraction is a fraction of: torch's total, where the
	// process said it, is a little less than NVML's
	whole := total
	if o.DeviceTotal > 0 {
		whole = o.DeviceTotal
	}
	limited := o.Limit > 0 && whole > 0 && o.Limit < whole
	switch {
	case total > 0 && o.Requested > total:
		e.Cause = "That is more than the whole GPU (" + units.Bytes(total) + "): the size itself is wrong, or the work must be split."
	case limited && o.Reserved+o.Requested > o.Limit:
		e.Cause = "torch may use only " + units.Bytes(o.Limit) + " of this GPU's " + units.Bytes(whole) +
			" (torch.cuda.set_per_process_memory_fraction), and this would take it past that: raise the fraction, or need less."
	case o.Requested > 0 && o.Requested <= unused:
		e.Cause = "The cache had room but no free block that large: fragmentation. " +
			"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."
	case known && outside > o.Allocated:
		e.Cause = "More is used outside this process's tensors than by them: other processes or the CUDA context."
	default:
		e.Cause = "Live tensors fill the GPU: holders (h in gputop, gputop.holders() in Python) names what keeps them, or use a smaller batch."
	}
	return e
}

// Findings are the verdicts of a run, for `gputop export`, where no screen
// shows them: per device, every end row's verdict (with the process's
// baseline comparison under it) and the latest OOM explained.
func Findings(snaps []wire.Row, devs []store.Device) []string {
	rows := Rows(snaps, devs)
	var out []string
	for dev := range devs {
		var dr []Row
		for _, r := range rows {
			if r.Dev == dev {
				dr = append(dr, r)
			}
		}
		if len(dr) == 0 {
			continue
		}
		name := fmt.Sprintf("GPU %d (%s)", dev, devs[dev].Name)
		for _, r := range dr {
			if r.Verdict == nil {
				continue
			}
			who := name
			if r.PID != 0 {
				who += fmt.Sprintf(", pid %d", r.PID)
			}
			out = append(out, who+": "+r.Verdict.Line())
			if r.Verdict.Baseline != "" {
				out = append(out, "  "+r.Verdict.Baseline)
			}
		}
		if r, o, ok := LatestOOM(dr, dev); ok {
			e := ExplainOOM(r, o, devs[dev].Total)
			out = append(out, fmt.Sprintf("%s: ✗ OOM at %s in pid %d: %s", name, TimeString(r.T), r.PID, e.Asked),
				"  "+e.Cause+" "+e.Where)
		}
	}
	return out
}
