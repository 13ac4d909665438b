// Package summary turns the store's rows into the summary table: deltas
// between rows, the verdict on end rows, MiB formatting and CSV export.
package summary

import (
	"fmt"
	"sort"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Row is one summary row with its changes since the previous row of the
// same device and process, and, on an end row, its verdict. A delta is nil
// when either side lacks that value.
type Row struct {
	wire.Row
	DevName    string
	DAllocated *int64 // torch allocated, vs the previous row of this process with allocator values
	DReserved  *int64
	DNVML      *int64   // NVML used, vs the previous row of this device and process with an NVML value
	Verdict    *Verdict // end rows only
	// from the store's series (RowsOf; nil from Rows): NVML's figure for
	// the process at the row's ledger, and the peak since the process's
	// previous row on the device
	NVMLProcess   *uint64
	NVMLProcessAt int64
	IntervalPeak  *IntervalPeak
}

// rowKey is whose rows a delta or a baseline compares: one process on one
// device (PID 0: the rows of no agent process).
type rowKey struct{ dev, pid int }

// Rows computes the summary rows in the order given (the store keeps them in
// time order): each row's deltas against the previous row of its device and
// process, and each end row's verdict.
func Rows(snaps []wire.Row, devs []store.Device) []Row {
	rows := make([]Row, len(snaps))
	prevAlloc := map[rowKey]wire.Row{}
	prevNVML := map[rowKey]wire.Row{}
	first := map[rowKey]wire.Row{}
	for i, s := range snaps {
		r := Row{Row: s}
		k := rowKey{s.Dev, s.PID}
		if s.Dev >= 0 && s.Dev < len(devs) {
			r.DevName = devs[s.Dev].Name
		}
		if p, ok := prevAlloc[k]; ok && s.Allocated != nil {
			r.DAllocated = diff(s.Allocated, p.Allocated)
			r.DReserved = diff(s.Reserved, p.Reserved)
		}
		if p, ok := prevNVML[k]; ok {
			r.DNVML = diff(s.NVMLUsed, p.NVMLUsed)
		}
		if s.Allocated != nil {
			prevAlloc[k] = s
		}
		if s.NVMLUsed != nil {
			prevNVML[k] = s
		}
		base, hasBase := first[k]
		if !hasBase {
			first[k] = s
		}
		if s.End {
			v := Judge(s, base, hasBase)
			r.Verdict = &v
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

// TimeString formats a row's time for tables and CSV (local time, ms).
func TimeString(t int64) string {
	return time.Unix(0, t).Format("2006-01-02T15:04:05.000Z07:00")
}

// DeviceRows are the summary rows of one device and what the table says
// under them.
type DeviceRows struct {
	Rows []Row
	// rows of more than one process: the table shows whose each row is
	MultiProcess bool
	// each process's latest end row (indexes into Rows), in pid order:
	// their verdicts stay under the table whatever rows come after
	Latest []int
	// the latest OOM row (index into Rows), or -1
	LatestOOM int
	// rows without allocator values (no agent then) and without NVML
	// figures: some of them, and all of them
	NoAllocSome, NoAllocAll, NoNVMLSome, NoNVMLAll bool
	// rows without allocator values whose agent reads another framework
	// (JAX, CuPy) and no torch there: some of them, and all of those
	// without allocator values
	NoTorchSome, NoTorchAll bool
}

// ForDevice picks the rows of device dev out of rows (in time order); the
// rows of other devices are never mixed in.
func ForDevice(rows []Row, dev int) DeviceRows {
	d := DeviceRows{LatestOOM: -1, NoAllocAll: true, NoNVMLAll: true}
	latest := map[int]int{}
	for _, r := range rows {
		if r.Dev != dev {
			continue
		}
		if len(d.Rows) > 0 && r.PID != d.Rows[0].PID {
			d.MultiProcess = true
		}
		if r.Verdict != nil {
			latest[r.PID] = len(d.Rows)
		}
		if r.OOM != nil {
			d.LatestOOM = len(d.Rows)
		}
		if r.Allocated == nil && len(r.Frameworks) > 0 {
			d.NoTorchSome = true
		} else if r.Allocated == nil {
			d.NoAllocSome = true
		}
		if r.Allocated != nil {
			d.NoAllocAll = false
		}
		if r.NVMLUsed == nil {
			d.NoNVMLSome = true
		} else {
			d.NoNVMLAll = false
		}
		d.Rows = append(d.Rows, r)
	}
	if len(d.Rows) == 0 {
		d.NoAllocAll, d.NoNVMLAll = false, false
	}
	d.NoTorchAll = d.NoAllocAll && d.NoTorchSome && !d.NoAllocSome
	pids := make([]int, 0, len(latest))
	for p := range latest {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	for _, p := range pids {
		d.Latest = append(d.Latest, latest[p])
	}
	return d
}
