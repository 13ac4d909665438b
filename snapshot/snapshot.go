// Package snapshot turns the store's snapshot rows into the summary table:
// deltas between rows, the leak verdict, MiB formatting and CSV export.
package snapshot

import (
	"fmt"
	"regexp"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Row is one summary row with its changes since the previous row of the same
// device. A delta is nil when either side lacks that value.
type Row struct {
	wire.Snapshot
	DevName    string
	DAllocated *int64 // torch allocated, vs the previous row with allocator values
	DReserved  *int64
	DNVML      *int64 // NVML used, vs the previous row with an NVML value
}

// Rows computes the summary rows in the order given (the store keeps them in
// time order).
func Rows(snaps []wire.Snapshot, devs []store.Device) []Row {
	rows := make([]Row, len(snaps))
	prevAlloc := map[int]wire.Snapshot{}
	prevNVML := map[int]wire.Snapshot{}
	for i, s := range snaps {
		r := Row{Snapshot: s}
		if s.Dev >= 0 && s.Dev < len(devs) {
			r.DevName = devs[s.Dev].Name
		}
		if p, ok := prevAlloc[s.Dev]; ok && s.Allocated != nil {
			r.DAllocated = diff(s.Allocated, p.Allocated)
			r.DReserved = diff(s.Reserved, p.Reserved)
		}
		if p, ok := prevNVML[s.Dev]; ok {
			r.DNVML = diff(s.NVMLUsed, p.NVMLUsed)
		}
		if s.Allocated != nil {
			prevAlloc[s.Dev] = s
		}
		if s.NVMLUsed != nil {
			prevNVML[s.Dev] = s
		}
		rows[i] = r
	}
	return rows
}

func diff(a, b *uint64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	d := int64(*a) - int64(*b)
	return &d
}

// endLabel matches snapshots that close a run: "After cleanup", "cleanup",
// "end", "Training end", "eval (end)".
var endLabel = regexp.MustCompile(`(?i)(clean[ -]?up|\bend\b|\(end\)$)`)

// IsEnd reports whether a label marks the end of a run for the leak verdict.
func IsEnd(label string) bool { return endLabel.MatchString(label) }

// Verdict compares the allocator state at an end snapshot with the first
// snapshot of the same device and process.
type Verdict struct {
	Baseline wire.Snapshot
	Now      wire.Snapshot
	Source   string // "torch" (allocated) or "NVML" (used), never mixed
	Leaked   int64  // bytes above the baseline (<= 0: released)
	Released bool
	Text     string
}

// LeakVerdict judges the last row when it is an end row. It compares torch's
// allocated bytes when both rows have them, else NVML used bytes; it never
// compares one source with the other.
func LeakVerdict(rows []Row) (Verdict, bool) {
	if len(rows) < 2 {
		return Verdict{}, false
	}
	last := rows[len(rows)-1].Snapshot
	if !IsEnd(last.Label) {
		return Verdict{}, false
	}
	for _, r := range rows[:len(rows)-1] {
		if r.Dev != last.Dev {
			continue
		}
		base := r.Snapshot
		v := Verdict{Baseline: base, Now: last}
		switch {
		case last.Allocated != nil && base.Allocated != nil && base.PID == last.PID:
			v.Source = "torch"
			v.Leaked = int64(*last.Allocated) - int64(*base.Allocated)
		case last.NVMLUsed != nil && base.NVMLUsed != nil:
			v.Source = "NVML"
			v.Leaked = int64(*last.NVMLUsed) - int64(*base.NVMLUsed)
		default:
			continue
		}
		what := "allocated (torch)"
		if v.Source == "NVML" {
			what = "used (NVML)"
		}
		v.Released = v.Leaked <= 0
		if v.Released {
			v.Text = fmt.Sprintf("%q: %s back at the %q baseline (%s MiB)", last.Label, what, base.Label, SignedMiB(v.Leaked))
		} else {
			v.Text = fmt.Sprintf("%q: %s MiB %s still above the %q baseline", last.Label, MiB(uint64(v.Leaked)), what, base.Label)
		}
		return v, true
	}
	return Verdict{}, false
}

// MiB formats bytes as MiB with two decimals, as the reference tracker does.
func MiB(b uint64) string { return fmt.Sprintf("%.2f", float64(b)/(1<<20)) }

// SignedMiB formats a byte difference as signed MiB.
func SignedMiB(d int64) string { return fmt.Sprintf("%+.2f", float64(d)/(1<<20)) }

// OptMiB formats an optional value; absent is "" (CSV) so it is never read as 0.
func OptMiB(b *uint64) string {
	if b == nil {
		return ""
	}
	return MiB(*b)
}

// DefaultCSVPath is where `e` writes without --csv.
func DefaultCSVPath(now time.Time) string {
	return "gputop-summary-" + now.Format("20060102-150405") + ".csv"
}

// TimeString formats a snapshot time for tables and CSV (local time, ms).
func TimeString(t int64) string {
	return time.Unix(0, t).Format("2006-01-02T15:04:05.000Z07:00")
}
