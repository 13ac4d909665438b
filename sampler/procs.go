// NVML's per-process usage, refreshed up to 10 times a second while a
// GPU's memory moves, once a second while it does not.

package sampler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/wire"
)

// procEvery is the shortest time between two process-list refreshes.
func (n *NVML) procEvery() time.Duration {
	return max(time.Duration(float64(time.Second)/n.opt.ProcRate), time.Millisecond)
}

// procsIdle is the longest the process lists go unread while no GPU's
// memory moves (or procEvery, when that is longer).
const procsIdle = time.Second

// procsDue reports whether the process lists are to be read again at now,
// from a loop that ticks every 2 × slack: procEvery has passed and some
// GPU's used memory changed since the last lists (a process came, went,
// grew or shrank: a CUDA context alone is hundreds of MiB), or procsIdle
// has passed. A process list costs the driver about 0.4 ms with a training
// process on an H200 (a memory reading 5 µs): at 10 a second that would
// be most of the TUI's Go side beside its frames, for figures that do not
// change while the memory does not. Memory moving between two processes
// whose sum stays the same waits for procsIdle.
func (n *NVML) procsDue(now time.Time, slack time.Duration) bool {
	if n.procsAt.IsZero() {
		return true
	}
	since := now.Sub(n.procsAt) + slack
	if since >= max(n.procEvery(), procsIdle) {
		return true
	}
	if since < n.procEvery() {
		return false
	}
	for _, d := range n.devs {
		if d.used.Load() != d.procsUsed {
			return true
		}
	}
	return false
}

func (n *NVML) procLoop(ctx context.Context) {
	every := n.procEvery()
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		if n.procsDue(time.Now(), every/2) {
			n.refreshProcs()
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// refreshProcs queries every device's processes once and stores them.
// NOT_SUPPORTED means the device has no process data: nothing is stored.
// Other errors are logged once per change; the device's error line is left
// to the memory sampler, which sees the same failures.
func (n *NVML) refreshProcs() {
	n.procsAt = time.Now()
	for _, d := range n.devs {
		d.procsUsed = d.used.Load() // before the query: a change during it is seen next time
	}
	n.names.begin()
	defer n.names.sweep()
	for _, d := range n.devs {
		if d.h == nil {
			continue
		}
		procs, ok, err := queryProcs(d.h)
		t := time.Now().UnixNano()
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Ret != d.procErr {
				d.procErr = e.Ret
				n.log(fmt.Sprintf("GPU %d: process list: %s", d.index, describe(e.Ret)))
			}
			continue
		}
		if d.procErr != nvml.SUCCESS {
			d.procErr = nvml.SUCCESS
			n.log(fmt.Sprintf("GPU %d: process list readable again", d.index))
		}
		if !ok {
			continue
		}
		for i := range procs {
			procs[i].Name = n.names.lookup(procs[i].PID)
		}
		n.in.Apply(0, wire.Procs{T: t, Dev: d.index, Procs: procs})
	}
}

// procUse is one pid's memory while merging; known is false when NVML
// reported only "not available".
type procUse struct {
	used  uint64
	known bool
}

// queryProcs returns the compute and graphics processes of a device merged
// by pid. ok is false when the device supports neither query.
func queryProcs(h nvml.Device) (procs []wire.Proc, ok bool, err error) {
	compute, r := h.GetComputeRunningProcesses()
	errC := check("GetComputeRunningProcesses", r)
	graphics, r := h.GetGraphicsRunningProcesses()
	errG := check("GetGraphicsRunningProcesses", r)
	for _, e := range []error{errC, errG} {
		if e != nil && !noData(e) {
			return nil, false, e
		}
	}
	if errC != nil && errG != nil {
		return nil, false, nil
	}
	return mergeProcs(compute, graphics), true, nil
}

// mergeProcs merges process lists by pid. One list can name a pid more than
// once (one entry per MIG instance): those are separate memory and add up.
// A pid in both lists is one context seen twice: the larger figure wins.
// "Not available" is unknown, never a number; it gives way to a known one.
// The result is sorted by memory used, largest first, unknown last.
func mergeProcs(lists ...[]nvml.ProcessInfo) []wire.Proc {
	merged := map[int]procUse{}
	for _, list := range lists {
		this := map[int]procUse{}
		for _, p := range list {
			u := this[int(p.Pid)]
			if p.UsedGpuMemory != notAvailable {
				u.used += p.UsedGpuMemory
				u.known = true
			}
			this[int(p.Pid)] = u
		}
		for pid, u := range this {
			m, seen := merged[pid]
			if !seen || (u.known && (!m.known || u.used > m.used)) {
				merged[pid] = u
			}
		}
	}
	out := make([]wire.Proc, 0, len(merged))
	for pid, u := range merged {
		out = append(out, wire.Proc{PID: pid, Used: u.used, UsedUnknown: !u.known})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.UsedUnknown != b.UsedUnknown {
			return !a.UsedUnknown
		}
		if a.Used != b.Used {
			return a.Used > b.Used
		}
		return a.PID < b.PID
	})
	return out
}
