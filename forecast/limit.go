// The memory a process can have: what a forecast measures the growth
// against.

package forecast

import (
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
)

// limit is the memory process a can have for its allocations on dev:
// the GPU's total (torch's, from the hello, else NVML's) less what the
// other processes use and what the process itself uses outside torch
// (NVML's figure for it less torch's reserved), and no more than the cap
// set_per_process_memory_fraction set, as the newest row that says it
// gives it (a mark's, read with the counters; an OOM's). It says where the
// figure comes from.
func limit(st *store.Store, a *store.Agent, dev int, at int64, live bool, pr *processRows) (uint64, string) {
	pid := a.Hello.PID
	var total uint64
	for _, d := range a.Hello.Devices {
		if sd, ok := a.DevMap[d.Index]; ok && sd == dev && d.Total > 0 {
			total = d.Total
		}
	}
	devs := st.Devices()
	if total == 0 && dev < len(devs) {
		total = devs[dev].Total
	}
	var lim uint64
	var from string
	if total > 0 {
		lim, from = total, "the GPU's total"
		others, self, seen := othersUse(st, pid, dev, at, live)
		var less []string
		if seen && others > 0 {
			less = append(less, units.Bytes(others)+" of other processes")
		}
		if rsv, ok := st.ValueAt(store.Key{Dev: dev, PID: pid, Metric: store.Reserved}, at); seen && ok && self > rsv {
			others += self - rsv
			less = append(less, units.Bytes(self-rsv)+" outside torch")
		}
		if others > 0 {
			lim = total - min(others, total)
			from = "the GPU's " + units.Bytes(total) + " less " + joinAnd(less)
		}
	}
	// the newest cap a row says: a mark's (the agent read it with the
	// counters) or an OOM's (torch's OOM observer gave it)
	if c := pr.cap; pr.capSeen && (total == 0 || c < total) && (lim == 0 || c < lim) {
		lim, from = c, "the cap set_per_process_memory_fraction set"
		if pr.capFromOOM {
			from += ", as its OOM said"
		}
	}
	return lim, from
}

// othersUse is what NVML says the processes on dev other than pid use,
// and pid's own figure; seen is false when NVML does not list pid (no
// NVML, or a process gputop cannot match to NVML's pids), as the others'
// sum would then count it too.
func othersUse(st *store.Store, pid, dev int, at int64, live bool) (others, self uint64, seen bool) {
	if live {
		procs, _ := st.Procs(dev)
		for _, p := range procs {
			switch {
			case p.UsedUnknown:
			case p.PID == pid:
				self, seen = p.Used, true
			default:
				others += p.Used
			}
		}
		return others, self, seen
	}
	const recent = int64(3 * time.Second) // NVML's lists come about 10 times a second
	for _, k := range st.Keys() {
		if k.Dev != dev || k.Metric != store.ProcUsed {
			continue
		}
		if _, ok := st.Max(k, at-recent, at+1); !ok {
			continue
		}
		if v, ok := st.ValueAt(k, at); ok {
			if k.PID == pid {
				self, seen = v, true
			} else {
				others += v
			}
		}
	}
	return others, self, seen
}

// joinAnd joins "a", "b", "c" as "a, b and c".
func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}
