// The ledger, the peak between rows and the advice from them in words,
// as `gputop export`, `gputop run`'s end and the TUI's row details write
// them.

package summary

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// LedgerParts writes a ledger's parts: "params 1.00 GiB, grads 0 B, …,
// outside torch 500.0 MiB" (an unknown part: "outside torch unknown").
// short names each part by its letter instead (the stacked bar's).
func LedgerParts(l Ledger, short bool) string {
	parts := make([]string, 0, len(l.Parts))
	for _, p := range l.Parts {
		name := p.Title
		if short {
			name = p.Short
		}
		v := "unknown"
		if p.Known {
			v = units.Bytes(p.Bytes)
		}
		parts = append(parts, name+" "+v)
	}
	return strings.Join(parts, ", ")
}

// LedgerSum says what the parts add up to and where that figure is from:
// "= 6.63 GiB, NVML's figure for the process" or, outside torch unknown,
// "= 6.13 GiB, torch's reserved (outside torch unknown: NVML gave no
// figure for the process at the walk)".
func LedgerSum(l Ledger) string {
	total, whole := l.Total()
	if whole {
		return "= " + units.Bytes(total) + ", NVML's figure for the process"
	}
	return "= " + units.Bytes(total) + ", torch's reserved (outside torch unknown: " + l.Part(wire.PartOutsideTorch).Why + ")"
}

// CachedFreeSplit is what the row's layout says of the cached free bytes:
// "largest free block 512.0 MiB, graph pools 0 B" ("": no layout).
func CachedFreeSplit(l Ledger) string {
	if l.Layout == nil {
		return ""
	}
	return fmt.Sprintf("largest free block %s, graph pools %s", units.Bytes(l.Layout.LargestFree), units.Bytes(l.Layout.GraphPoolsBytes()))
}

// LedgerBasis says what each part is based on: "params … workspaces: the
// agent's walk of live tensors at 0:00:19.0 (38 ms), unattributed:
// allocated − those, cached free: torch's reserved − allocated, outside
// torch: NVML's process list at 0:00:19.0 − reserved" (without wide,
// shorter and with the parts' letters), and what the walk could not
// count; when writes a time as the caller does.
func LedgerBasis(l Ledger, when func(int64) string, wide bool) string {
	name := func(p Part) string { return p.Short + " " }
	walk, u, c, x := "walk at "+when(l.T), "alloc − those", "reserved − alloc", "NVML at %s − reserved"
	if wide {
		name = func(p Part) string { return p.Title + ": " }
		walk, u, c, x = "the agent's walk of live tensors at "+when(l.T), "allocated − those", "torch's reserved − allocated", "NVML's process list at %s − reserved"
	}
	if l.TookMS > 0 {
		walk += fmt.Sprintf(" (%.0f ms)", l.TookMS)
	}
	first, last := l.Part(wire.PartParams), l.Part(wire.PartWorkspace)
	tensors := first.Short + "…" + last.Short + " "
	if wide {
		tensors = first.Title + " … " + last.Title + ": "
	}
	parts := []string{tensors + walk, name(l.Part(wire.PartUnattributed)) + u, name(l.Part(wire.PartCachedFree)) + c}
	if out := l.Part(wire.PartOutsideTorch); out.Known {
		parts = append(parts, name(out)+fmt.Sprintf(x, when(l.NVMLAt)))
	} else {
		unknown := out.Short + " unknown: "
		if wide {
			unknown = out.Title + " unknown: "
		}
		parts = append(parts, unknown+out.Why)
	}
	s := strings.Join(parts, ", ")
	if len(l.Uncounted) > 0 {
		s += "; not counted: " + strings.Join(l.Uncounted, "; ")
	}
	return s
}

// PeakText writes an interval's peak and what it was made of:
// `peak since "step 1": 5.63 GiB, exact (torch's peak counter rose) =
// persistent 3.13 GiB (ledger at "step 1") + activations and temporaries
// 2.50 GiB`.
func PeakText(k IntervalPeak) string {
	since := "since the process's first sample"
	if k.FromLabel != "" {
		since = fmt.Sprintf("since %q", k.FromLabel)
	}
	s := "peak " + since + ": "
	switch {
	case k.Exact && k.Reached:
		s += units.Bytes(k.Bytes) + ", exact (torch's peak counter did not rise, and allocated reached it)"
	case k.Exact:
		s += units.Bytes(k.Bytes) + ", exact (torch's peak counter rose)"
	case k.AtMost != nil:
		s += fmt.Sprintf("%s to %s, a bound (torch's peak counter did not rise: at most it; at least the highest sample)",
			units.Bytes(k.Bytes), units.Bytes(*k.AtMost))
	default:
		s += "at least " + units.Bytes(k.Bytes) + " (the highest sample; the program reset torch's peak counter in between: no upper bound)"
	}
	if k.Coarse {
		s += " (samples from 100 ms+ buckets: may reach a bucket outside the interval)"
	}
	lo, hi, ok := k.Rest()
	if !ok {
		return s + "; no ledger at either row to break it down"
	}
	p := k.Persistent
	s += fmt.Sprintf(" = persistent %s (ledger at %q) + activations and temporaries ", units.Bytes(p.Sum()), p.Label)
	switch {
	case hi != nil && *hi == lo:
		s += units.Bytes(lo)
	case hi != nil:
		s += units.Bytes(lo) + " to " + units.Bytes(*hi)
	default:
		s += "at least " + units.Bytes(lo)
	}
	if top := k.Top(); top != nil && p.Sum() > *top {
		s += " (the persistent parts are more than the peak: some were freed after the ledger)"
	}
	return s
}

// PersistentText lists the persistent parts: "params 1.00 GiB, grads 0 B,
// optimizer state 2.00 GiB, other tensors 100.0 MiB, workspaces 32.0 MiB".
func PersistentText(p Persistent) string {
	return fmt.Sprintf("params %s, grads %s, optimizer state %s, other tensors %s, workspaces %s",
		units.Bytes(p.Params), units.Bytes(p.Grads), units.Bytes(p.Optimizer), units.Bytes(p.OtherTensors), units.Bytes(p.Workspace))
}

// The shares past which the ledger gives advice: each a measured share of
// an exact peak, or of torch's reserved bytes.
const (
	OptimizerAdvice     = 0.30 // optimizer state's share of the peak
	ActivationsAdvice   = 0.50 // activations and temporaries' share of the peak
	CachedFreeAdvice    = 0.25 // cached free's share of torch's reserved bytes
	FragmentationAdvice = 0.50 // 1 − largest free block ÷ free in the cache
)

// Advice is what the ledger and the peak before a row suggest, each line
// naming the figures it comes from; only from an exact peak (one pinned
// down by torch's peak counter) and a measured layout. None where nothing
// is clear.
func Advice(r Row) []string {
	var out []string
	pct := func(part, whole uint64) string { return fmt.Sprintf("%.0f%%", 100*float64(part)/float64(whole)) }
	if k := r.IntervalPeak; k != nil && k.Exact && k.Persistent != nil && k.Bytes > 0 {
		p := k.Persistent
		if float64(p.Optimizer) >= OptimizerAdvice*float64(k.Bytes) {
			out = append(out, fmt.Sprintf("optimizer state %s is %s of the peak %s (ledger at %q): a lower-memory optimizer (8-bit Adam, Adafactor, SGD) or sharding its state (ZeRO, FSDP) cuts it",
				units.Bytes(p.Optimizer), pct(p.Optimizer, k.Bytes), units.Bytes(k.Bytes), p.Label))
		}
		if rest, _, _ := k.Rest(); float64(rest) >= ActivationsAdvice*float64(k.Bytes) {
			out = append(out, fmt.Sprintf("activations and temporaries %s are %s of the peak %s: activation checkpointing or a smaller batch cuts them",
				units.Bytes(rest), pct(rest, k.Bytes), units.Bytes(k.Bytes)))
		}
	}
	if l, ok := LedgerOf(r); ok && l.Layout != nil && l.Reserved > 0 {
		free, lay := l.CachedFree(), l.Layout
		if float64(free) >= CachedFreeAdvice*float64(l.Reserved) && lay.FreeInSegments > 0 && lay.Fragmentation() >= FragmentationAdvice {
			out = append(out, fmt.Sprintf("cached free %s is %s of torch's reserved %s, and its largest free block is %s (fragmentation %s, layout at the row): PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets it be used",
				units.Bytes(free), pct(free, l.Reserved), units.Bytes(l.Reserved), units.Bytes(lay.LargestFree), fmt.Sprintf("%.0f%%", 100*lay.Fragmentation())))
		}
	}
	return out
}

// LedgerFindings are the ledger's lines of a run, for `gputop export` and
// `gputop run`'s end, where no screen shows them: each end row's ledger,
// and per process and device the highest peak between its rows, broken
// down, with the advice from it.
func LedgerFindings(st *store.Store) []string {
	devs := st.Devices()
	rows := RowsOf(st, st.Rows(), devs)
	var out []string
	who := func(r Row) string {
		name := ""
		if r.Dev >= 0 && r.Dev < len(devs) {
			name = " (" + devs[r.Dev].Name + ")"
		}
		return fmt.Sprintf("GPU %d%s, pid %d", r.Dev, name, r.PID)
	}
	highest := map[rowKey]int{}
	lined := map[rowKey]int{} // the highest row with the blocks at its peak by line
	var keys []rowKey
	for i, r := range rows {
		if r.End && r.PID > 0 {
			if l, ok := LedgerOf(r); ok {
				line := fmt.Sprintf("%s: ledger at %q: %s %s", who(r), r.Label, LedgerParts(l, false), LedgerSum(l))
				if s := CachedFreeSplit(l); s != "" {
					line += "; cached free: " + s
				}
				out = append(out, line, "  based on: "+LedgerBasis(l, TimeString, true))
			} else if n := LedgerNote(r); n != "" {
				out = append(out, fmt.Sprintf("%s: %q: %s", who(r), r.Label, n))
			}
		}
		k := r.IntervalPeak
		if k == nil {
			continue
		}
		key := rowKey{r.Dev, r.PID}
		j, seen := highest[key]
		if !seen {
			keys = append(keys, key)
		}
		if !seen || higher(*k, *rows[j].IntervalPeak) {
			highest[key] = i
		}
		if p := r.PeakLines; p != nil && p.Skipped == "" {
			if j, ok := lined[key]; !ok || higher(*k, *rows[j].IntervalPeak) {
				lined[key] = i
			}
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].dev != keys[b].dev {
			return keys[a].dev < keys[b].dev
		}
		return keys[a].pid < keys[b].pid
	})
	for _, key := range keys {
		r := rows[highest[key]]
		out = append(out, fmt.Sprintf("%s: highest peak, before %q: %s", who(r), r.Label, PeakText(*r.IntervalPeak)))
		if p := r.IntervalPeak.Persistent; p != nil {
			out = append(out, "  persistent: "+PersistentText(*p))
		}
		for _, a := range Advice(r) {
			out = append(out, "  advice: "+a)
		}
		// history may have been on for part of the run only: then the
		// highest peak whose blocks are known by line, named as such
		if j, ok := lined[key]; ok {
			l := rows[j]
			if j == highest[key] {
				out = append(out, "  "+PeakLinesText(*l.PeakLines, l.T))
			} else {
				out = append(out, fmt.Sprintf("  before %q, the highest peak with its blocks known by line: %s",
					l.Label, PeakLinesText(*l.PeakLines, l.T)))
			}
		}
	}
	return out
}

// higher reports whether peak a is above b: the higher figure, an exact
// one before a bound of the same.
func higher(a, b IntervalPeak) bool {
	if a.Bytes != b.Bytes {
		return a.Bytes > b.Bytes
	}
	return a.Exact && !b.Exact
}
