// Package status makes the status report (`gputop status`) from a store:
// the devices with NVML's figures, NVML's processes, each agent's
// allocator, the newest rows with their verdicts and the newest OOMs
// explained, each list bounded (wire.MaxStatus*). A running gputop makes
// it for the status frames its socket answers; `gputop status` makes it
// itself from one NVML reading when none runs. It reads the store and
// never writes it.
package status

import (
	"cmp"
	"path"
	"slices"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// Why the lists of a report from one NVML reading are empty.
const (
	NoAgentsFromNVML = "no gputop is running: one NVML reading knows no agents (they attach to a running gputop)"
	NoRowsFromNVML   = "no gputop is running: rows are taken by a running gputop"
	NoOOMsFromNVML   = "no gputop is running: OOMs are reported by agents to a running gputop"
)

// Options say where the store's figures come from and when the report is made.
type Options struct {
	Source string    // wire.StatusFromGputop or wire.StatusFromNVML
	Now    time.Time // the report's time; time.Now when zero
}

// Of is the status report of st.
func Of(st *store.Store, opt Options) wire.StatusReport {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	r := wire.StatusReport{Version: wire.StatusVersion, Source: opt.Source, T: opt.Now.UnixNano()}
	devs := st.Devices()
	r.Devices, r.DevicesWhy = devices(st, devs)
	r.Processes, r.ProcessesLeftOut, r.ProcessesWhy = processes(st, devs)
	if opt.Source == wire.StatusFromNVML {
		r.Agents, r.Rows, r.OOMs = []wire.StatusAgent{}, []wire.StatusRow{}, []wire.StatusOOM{}
		r.AgentsWhy, r.RowsWhy, r.OOMsWhy = NoAgentsFromNVML, NoRowsFromNVML, NoOOMsFromNVML
		return r
	}
	all := summary.Rows(st.Rows(), devs)
	r.Agents, r.AgentsLeftOut = agents(st, all)
	if len(r.Agents) == 0 {
		r.AgentsWhy = "no agent has attached to this gputop (gputop.attach() in the training process, or gputop run)"
	}
	r.Rows, r.RowsLeftOut = rows(st, all)
	if len(r.Rows) == 0 {
		r.RowsWhy = "no row taken yet (the s or c key, gputop snap, gputop.snapshot() in code, an OOM)"
	}
	r.OOMs, r.OOMsLeftOut = ooms(st, all, devs)
	if len(r.OOMs) == 0 {
		r.OOMsWhy = "no agent has reported a CUDA out-of-memory error"
	}
	return r
}

func devices(st *store.Store, devs []store.Device) ([]wire.StatusDevice, string) {
	out := []wire.StatusDevice{}
	for _, d := range devs {
		if d.UUID == "" && d.Name == "" {
			continue // a gap in the device list
		}
		sd := wire.StatusDevice{Index: d.Index, UUID: d.UUID, Name: d.Name, Host: d.Host, From: d.Source, Error: d.Err}
		if sd.From == "" {
			sd.From = "nvml"
		}
		if d.Total > 0 {
			sd.Total = ptr(d.Total)
		}
		if d.Source == "nvml" {
			if used, t, ok := st.Latest(store.Key{Dev: d.Index, Metric: store.NVMLUsed}); ok {
				sd.Used, sd.UsedT = ptr(used), t
				reserved, _, _ := st.Latest(store.Key{Dev: d.Index, Metric: store.NVMLReserved})
				if d.Total >= used+reserved {
					sd.Free = ptr(d.Total - used - reserved)
				}
			}
		}
		out = append(out, sd)
	}
	if len(out) == 0 {
		return out, "no GPU known: NVML (where gputop reads it) listed none, and no agent named one"
	}
	return out, ""
}

func processes(st *store.Store, devs []store.Device) ([]wire.StatusProcess, int, string) {
	agents := map[int]bool{}
	for _, a := range st.Agents() {
		if a.Connected {
			agents[a.Hello.PID] = true
		}
	}
	out := []wire.StatusProcess{}
	left := 0
	for _, d := range devs {
		procs, t := st.Procs(d.Index)
		for _, p := range procs {
			if len(out) == wire.MaxStatusProcesses {
				left++
				continue
			}
			sp := wire.StatusProcess{Dev: d.Index, Name: p.Name, T: t, Agent: agents[p.PID]}
			sp.PID, sp.Key = pidOf(st, p.PID)
			if !p.UsedUnknown {
				sp.Used = ptr(p.Used)
			}
			out = append(out, sp)
		}
	}
	if len(out) > 0 {
		return out, left, ""
	}
	for _, d := range devs {
		if d.Source == "nvml" {
			return out, left, "NVML lists no process on any GPU (or the driver would not say)"
		}
	}
	return out, left, "no GPU is read through NVML here (gputop --source agent, or no driver): only agents' figures"
}

// agents lists the connected agents, then the most recently ended, at
// most wire.MaxStatusAgents.
func agents(st *store.Store, rows []summary.Row) ([]wire.StatusAgent, int) {
	all := st.Agents()
	slices.SortStableFunc(all, func(a, b store.Agent) int {
		if a.Connected != b.Connected {
			if a.Connected {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.EndedAt, a.EndedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Hello.PID, b.Hello.PID)
	})
	left := max(0, len(all)-wire.MaxStatusAgents)
	all = all[:len(all)-left]
	limits := newestLimits(rows)
	ledgers := map[[2]int]wire.Row{}
	for _, lr := range st.LatestLedgers() {
		ledgers[[2]int{lr.PID, lr.Dev}] = lr.Row
	}
	out := make([]wire.StatusAgent, 0, len(all))
	for _, a := range all {
		sa := wire.StatusAgent{Name: argv0(a.Hello.Argv), Torch: a.Hello.Torch, Connected: a.Connected,
			EndReason: a.EndReason, Devices: []wire.StatusAgentDevice{}}
		sa.PID, sa.Key = pidOf(st, a.Hello.PID)
		if !a.Connected {
			sa.EndedAt = a.EndedAt
		}
		torch := make([]int, 0, len(a.DevMap))
		for ti := range a.DevMap {
			torch = append(torch, ti)
		}
		slices.Sort(torch)
		if n := len(torch) - wire.MaxStatusAgentDevices; n > 0 {
			torch, sa.DevicesLeftOut = torch[:wire.MaxStatusAgentDevices], n
		}
		for _, ti := range torch {
			dev := a.DevMap[ti]
			ad := wire.StatusAgentDevice{Dev: dev, TorchDev: ti}
			if smp, ok := a.Last[dev]; ok {
				ad.T = smp.T
				ad.Allocated, ad.Reserved, ad.Peak = ptr(smp.Allocated), ptr(smp.Reserved), ptr(smp.Peak)
				ad.Inactive, ad.AllocRetries, ad.OOMs = ptr(smp.Inactive), ptr(smp.AllocRetries), ptr(smp.OOMs)
			}
			if l, ok := limits[[2]int{a.Hello.PID, dev}]; ok {
				ad.Limit = ptr(l)
			}
			if at := st.LatestLayout(a.Hello.PID, dev); at.OK {
				l := at.Layout
				ad.Layout = &wire.StatusLayout{T: l.T, Segments: l.Segments, Blocks: l.Blocks, Reserved: l.Reserved,
					Allocated: l.Allocated, FreeInSegments: l.FreeInSegments, LargestFree: l.LargestFree,
					Fragmentation: l.Fragmentation(), Expandable: l.Expandable}
			}
			if r, ok := ledgers[[2]int{a.Hello.PID, dev}]; ok {
				ad.Ledger = ledger(st, r)
			}
			sa.Devices = append(sa.Devices, ad)
		}
		out = append(out, sa)
	}
	return out, left
}

// newestLimits is, by process and device, the limit of the newest row
// (or OOM) that carried one: the most torch may hold there.
func newestLimits(rows []summary.Row) map[[2]int]uint64 {
	out := map[[2]int]uint64{}
	for _, r := range rows {
		k := [2]int{r.PID, r.Dev}
		switch {
		case r.Limit != nil && *r.Limit > 0:
			out[k] = *r.Limit
		case r.OOM != nil && r.OOM.Limit > 0:
			out[k] = r.OOM.Limit
		}
	}
	return out
}

// ledger is row r's ledger as the summary reads it, with NVML's figure
// for the process at its walk.
func ledger(st *store.Store, r wire.Row) *wire.StatusLedger {
	sr := summary.Row{Row: r}
	t := r.Ledger.T
	if t == 0 {
		t = r.T
	}
	if used, at, ok := st.ProcUsedAt(r.Dev, r.PID, t, store.ProcFigureAge); ok {
		sr.NVMLProcess, sr.NVMLProcessAt = &used, at
	}
	l, ok := summary.LedgerOf(sr)
	if !ok {
		return nil
	}
	out := &wire.StatusLedger{Row: r.ID, T: t, Parts: make([]wire.StatusPart, 0, len(l.Parts))}
	for _, p := range l.Parts {
		sp := wire.StatusPart{Name: p.Name}
		if p.Known {
			sp.Bytes = ptr(p.Bytes)
		} else {
			sp.Why = p.Why
		}
		out.Parts = append(out.Parts, sp)
	}
	return out
}

// rows are the newest wire.MaxStatusRows rows, oldest first.
func rows(st *store.Store, all []summary.Row) ([]wire.StatusRow, int) {
	left := max(0, len(all)-wire.MaxStatusRows)
	out := make([]wire.StatusRow, 0, len(all)-left)
	for _, r := range all[left:] {
		sr := wire.StatusRow{ID: r.ID, T: r.T, Label: r.Label, Dev: r.Dev, Source: r.Source, Kind: r.Kind, End: r.End,
			Allocated: r.Allocated, Reserved: r.Reserved, Peak: r.Peak, NVMLUsed: r.NVMLUsed, NVMLPeak: r.NVMLPeak, Limit: r.Limit}
		if r.PID != 0 {
			sr.PID, sr.Key = pidOf(st, r.PID)
		}
		if v := r.Verdict; v != nil {
			sr.Verdict = &wire.StatusVerdict{Status: v.Status.String(), Mark: v.Status.Mark(), Text: v.Text,
				Basis: v.Basis, Baseline: v.Baseline}
		}
		out = append(out, sr)
	}
	return out, left
}

// ooms are the newest wire.MaxStatusOOMs OOM rows, oldest first, each
// explained as the summary explains it.
func ooms(st *store.Store, all []summary.Row, devs []store.Device) ([]wire.StatusOOM, int) {
	var idx []int
	for i, r := range all {
		if r.OOM != nil {
			idx = append(idx, i)
		}
	}
	left := max(0, len(idx)-wire.MaxStatusOOMs)
	out := make([]wire.StatusOOM, 0, len(idx)-left)
	for _, i := range idx[left:] {
		r := all[i]
		o := *r.OOM
		var total uint64
		if r.Dev >= 0 && r.Dev < len(devs) {
			total = devs[r.Dev].Total
		}
		e := summary.ExplainOOM(r, o, total)
		so := wire.StatusOOM{Row: r.ID, T: o.T, Dev: r.Dev, Allocated: o.Allocated, Reserved: o.Reserved, Peak: o.Peak,
			Requested: nonzero(o.Requested), Free: nonzero(o.Free), Limit: nonzero(o.Limit),
			Explanation: &wire.StatusExplanation{Asked: e.Asked, Cause: e.Cause, Fix: e.Fix, Where: e.Where}}
		so.PID, so.Key = pidOf(st, r.PID)
		out = append(out, so)
	}
	return out, left
}

// pidOf is a process's pid on its own host and, where it differs from
// that, how gputop names it (store.PIDLabel).
func pidOf(st *store.Store, key int) (int, string) {
	_, pid := store.SplitPID(key)
	if key == pid {
		return pid, ""
	}
	return pid, st.PIDLabel(key)
}

func ptr(v uint64) *uint64 { return &v }

func nonzero(v uint64) *uint64 {
	if v == 0 {
		return nil
	}
	return &v
}

// argv0 is a process's name from its argv: argv[0]'s base name.
func argv0(argv []string) string {
	if len(argv) == 0 || argv[0] == "" {
		return "python"
	}
	return printable.Clean(path.Base(argv[0]))
}
