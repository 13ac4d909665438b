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
// figures point to. With the layout read at the OOM (wire.OOM.Layout), the
// Cause starts "Measured at the OOM:" with torch's cache then, and Fix is
// what gputop suggests, apart from the measured figures.
type OOMExplanation struct {
	Asked string // "asked for 4.00 GiB, 1.20 GiB free on the GPU (CUDA)."
	Where string // torch's allocated and cached-but-unused bytes, NVML outside torch's cache
	Cause string
	Fix   string // "Suggestion: ...", or "" (without a layout, the Cause says it)
	// Short is Asked, Cause and Fix in two sentences, for a pane too short
	// for them: "asked 800.0 MiB; ... : fragmentation (measured).
	// Suggestion: ..."; "" where there is none (no layout: the Cause is
	// short already)
	Short string
}

// Text is the explanation after its Asked: the cause first, then the
// suggestion, then where the memory was.
func (e OOMExplanation) Text() string {
	parts := []string{e.Cause}
	if e.Fix != "" {
		parts = append(parts, e.Fix)
	}
	return strings.Join(append(parts, e.Where), " ")
}

// ExplainOOM explains an OOM row r and its frame o on a device of total
// bytes (0 when unknown).
func ExplainOOM(r Row, o wire.OOM, total uint64) OOMExplanation {
	if o.Framework != "" {
		return explainFrameworkOOM(r, o, total)
	}
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
	const (
		fragmentation = "The cache had room but no free block that large: fragmentation. " +
			"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it."
		outsideTensors = "More is used outside this process's tensors than by them: other processes or the CUDA context."
		liveTensors    = "Live tensors fill the GPU"
		holders        = "holders (h in gputop, gputop.holders() in Python) names what keeps them, or use a smaller batch."
	)
	l := o.Layout
	switch {
	case total > 0 && o.Requested > total:
		e.Cause = "That is more than the whole GPU (" + units.Bytes(total) + "): the size itself is wrong, or the work must be split."
	case l != nil && o.Requested > l.LargestFree && o.Requested <= l.FreeInSegments:
		e.Cause = fmt.Sprintf("Measured at the OOM: %s free in torch's cache but its largest free block is %s, less than the %s asked: fragmentation (%s = 1 − largest free block ÷ free in the cache).",
			units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree), units.Bytes(o.Requested), Percent(l.Fragmentation()))
		e.Fix = fragmentationFix(*l)
		e.Short = fmt.Sprintf("asked %s; %s free in torch's cache but the largest free block is %s: fragmentation (measured). ",
			units.Bytes(o.Requested), units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree)) + shortFix(*l)
	case l != nil && o.Requested > l.FreeInSegments:
		e.Cause = fmt.Sprintf("Measured at the OOM: %s free in torch's cache (largest free block %s), less than the %s asked, with %s in live blocks of the %s it reserved.",
			units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree), units.Bytes(o.Requested), units.Bytes(l.Allocated), units.Bytes(l.Reserved))
		cache := fmt.Sprintf("asked %s; only %s free in torch's cache (largest free block %s)",
			units.Bytes(o.Requested), units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree))
		switch {
		case limited && o.Reserved+o.Requested > o.Limit:
			e.Cause += " " + fractionCause(o.Limit, whole)
		case known && outside > o.Allocated:
			e.Cause += " " + outsideTensors
			e.Fix = "Suggestion: NVML's process list (the process pane) names who else holds the GPU."
			e.Short = cache + fmt.Sprintf(" and %s on the GPU outside it (measured): other processes or the CUDA context. ", units.Bytes(outside)) + e.Fix
		default:
			e.Cause += " " + liveTensors + "."
			e.Fix = "Suggestion: " + holders
			e.Short = cache + fmt.Sprintf(", %s in live blocks (measured): live tensors fill the GPU. ", units.Bytes(l.Allocated)) + e.Fix
		}
	case limited && o.Reserved+o.Requested > o.Limit:
		e.Cause = fractionCause(o.Limit, whole)
	case l == nil && o.Requested > 0 && o.Requested <= unused:
		e.Cause = fragmentation
	case known && outside > o.Allocated:
		e.Cause = outsideTensors
	default:
		e.Cause = liveTensors + ": " + holders
	}
	if l != nil && !strings.HasPrefix(e.Cause, "Measured") {
		// a request the cache's largest block would have taken, or no size:
		// the figures, and the cause the counters point to
		e.Cause = fmt.Sprintf("Measured at the OOM: %s free in torch's cache, largest free block %s. ",
			units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree)) + e.Cause
	}
	return e
}

// fractionCause is the cause of an OOM past a memory fraction's limit.
func fractionCause(limit, whole uint64) string {
	return "torch may use only " + units.Bytes(limit) + " of this GPU's " + units.Bytes(whole) +
		" (torch.cuda.set_per_process_memory_fraction), and this would take it past that: raise the fraction, or need less."
}

// shortFix is fragmentationFix for a short pane.
func shortFix(l wire.Layout) string {
	inForce, _, how := expandable(l)
	if inForce {
		return "Suggestion: smaller requests (expandable_segments is in force already)."
	}
	return "Suggestion: expandable_segments:True (" + how + ") lets such requests reuse the space."
}

// fragmentationFix is the suggestion for an OOM of fragmentation, from
// what the layout says of expandable_segments.
func fragmentationFix(l wire.Layout) string {
	env := "PYTORCH_CUDA_ALLOC_CONF"
	if s := l.Settings; s != nil && s.Env != "" {
		env = clip(s.Env)
	}
	inForce, how, _ := expandable(l)
	if inForce {
		return "Suggestion: expandable_segments is in force already (" + how + "), so only smaller requests, or fewer live tensors between the large ones, leave a block this large."
	}
	return "Suggestion: " + env + "=expandable_segments:True (" + how + ") lets such requests reuse the space."
}

// Findings are the verdicts of a run, for `gputop export`, where no screen
// shows them: per device, every end row's verdict (with the process's
// baseline comparison and torch's cache at the row under it) and the
// latest OOM explained, with torch's cache read at it.
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
			if l := RowLayoutText(r.Row); l != "" {
				out = append(out, "  "+l)
			}
		}
		if r, o, ok := LatestOOM(dr, dev); ok {
			e := ExplainOOM(r, o, devs[dev].Total)
			out = append(out, fmt.Sprintf("%s: ✗ OOM at %s in pid %d: %s", name, TimeString(r.T), r.PID, e.Asked),
				"  "+e.Text())
			if l := o.Layout; l != nil {
				out = append(out, "  torch's cache at the OOM: "+LayoutText(*l, o.T, "the OOM"))
			}
		}
	}
	return out
}
