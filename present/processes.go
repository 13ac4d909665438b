// Package present answers what a screen or an exporter shows, joined from the
// store: the processes on a GPU (NVML's list with each one's agent), and
// the summary rows with their verdicts, the same for live and replay (a
// replay asks at its cursor). The UI only draws what it gets.
package present

import (
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Process is one process on a device: NVML's view joined with
// its agent's (when it has one).
type Process struct {
	PID       int    // the store's pid key (a remote host's process: store.HostPID)
	Label     string // the pid as shown: "1234", or "host:1234" for a remote host's process
	Name      string
	Used      *uint64 // NVML per-process used
	UsedLast  bool    // replay: Used is NVML's last figure from before the process left (more than the GPU's used at the cursor)
	Allocated *uint64 // torch, from the agent
	Reserved  *uint64
	NonTorch  *int64 // Used - Reserved: CUDA context, cuBLAS workspace, other libraries
	Agent     bool
	Status    string // attached, ended (killed), exited
	Ended     bool
	EndedAt   int64 // when its agent ended (Ended)
	// NSLocal: its agent lives in a pid namespace gputop cannot see (another
	// container): PID is a key of its connection, and the pid it gave is
	// its own inside that namespace, not one NVML or this machine knows
	NSLocal bool
	OOMs    int
	Holders *wire.Holders
	Rank    string // the agent's place in its job: "rank 3/8"; "" when it gave none
	// History: the agent records torch's allocation history (its
	// max_entries; 0: off); HistoryError: why history asked for is off.
	History      int
	HistoryError string
	// Frameworks: the other frameworks' figures on the device (JAX,
	// CuPy), their newest reading at the time asked, read at FrameworksAt
	Frameworks   []wire.Framework
	FrameworksAt int64
	// Stand: where the process has no torch figures on the device, the
	// framework whose in-use and reserved stand in the table's allocated
	// and reserved cells, labelled with its name; nil otherwise
	Stand *StandIn
}

// StandIn is a framework's figures shown where torch's would be: InUse
// (JAX's bytes_in_use, CuPy's used_bytes) and Reserved (pool_bytes or
// bytes_reserved, total_bytes), each by its own name; nil when the
// framework did not report it.
type StandIn struct {
	Name            string
	InUse, Reserved *wire.Figure
}

// standIn is the first of fs with an in-use figure, as a StandIn; nil
// when none has one.
func standIn(fs []wire.Framework) *StandIn {
	for _, f := range fs {
		in, ok := f.Get(wire.FigInUse)
		if !ok {
			continue
		}
		s := &StandIn{Name: f.Name, InUse: &in}
		if re, ok := f.Get(wire.FigReserved); ok {
			s.Reserved = &re
		}
		return s
	}
	return nil
}

// agentOn reports whether an agent process uses store device dev.
func agentOn(a *store.Agent, dev int) bool {
	for _, d := range a.DevMap {
		if d == dev {
			return true
		}
	}
	return false
}

// ProcsSpan is how far back a replay looks for a process's NVML samples
// before it counts the process as gone (procs are sampled at about 10/s).
const ProcsSpan = 3 * time.Second

// MaxEndedListed bounds the processes listed whose agent has ended and
// that NVML no longer lists: the most recently ended are listed, the
// rest counted, so a node that ran thousands of short jobs lists a pane's
// worth.
const MaxEndedListed = 32

// Processes joins the NVML process list of dev with the agents on dev.
// Live, it uses the latest lists and each agent's last sample; in replay it
// reads every value at the cursor t, so the pane shows that moment. Ended
// agent processes past MaxEndedListed are left out, and so are those the
// store has forgotten (store.Options.KeepEnded): it returns how many.
func Processes(st *store.Store, dev int, t int64, replay bool) ([]Process, int) {
	byPID := map[int]*Process{}
	get := func(pid int) *Process {
		r := byPID[pid]
		if r == nil {
			r = &Process{PID: pid}
			byPID[pid] = r
		}
		return r
	}
	if replay {
		// values from the cursor; names as last known (the recording's
		// final process list is empty once the job has exited). A value
		// above the whole GPU's used is from before the process left: NVML
		// lists no sample for a process that is gone, so its last one stays
		devUsed, devOK := st.ValueAt(store.Key{Dev: dev, Metric: store.NVMLUsed}, t)
		for _, k := range st.Keys() {
			if k.Dev != dev || k.Metric != store.ProcUsed {
				continue
			}
			if _, ok := st.Max(k, t-int64(ProcsSpan), t+1); !ok {
				continue
			}
			if v, ok := st.ValueAt(k, t); ok {
				r := get(k.PID)
				r.Used, r.Name = &v, st.ProcName(k.PID)
				r.UsedLast = devOK && v > devUsed
			}
		}
	} else {
		procs, _ := st.Procs(dev)
		for _, p := range procs {
			r := get(p.PID)
			u := p.Used
			r.Used, r.Name = &u, p.Name
			if p.Name == "?" || p.Name == "" {
				r.Name = st.ProcName(p.PID)
			}
		}
	}
	agents := st.Agents()
	for i := range agents {
		a := &agents[i]
		if !agentOn(a, dev) || (replay && a.Hello.T > t) {
			continue
		}
		pid := a.Hello.PID
		r := get(pid)
		r.Agent, r.OOMs, r.Holders, r.Rank = true, a.OOMs, a.Holders, a.Place.String()
		r.History, r.HistoryError = a.Hello.History, a.Hello.HistoryError
		if n := ProcName(a.Hello.Argv); n != "" {
			r.Name = n
		}
		gone := !a.Connected
		if replay {
			gone = a.EndedAt != 0 && a.EndedAt <= t
			r.Holders = a.HoldersAt(t) // the report nearest before the cursor
		}
		switch {
		case !gone:
			r.Status = "attached"
		case a.Ended:
			r.Status, r.Ended = "ended (killed)", true
		default:
			r.Status, r.Ended = "exited", true
		}
		if r.Ended {
			r.EndedAt = a.EndedAt
		}
		r.NSLocal = store.NamespaceConn(pid) > 0
		fwAt := t
		if !replay {
			fwAt = math.MaxInt64
		}
		if fw := st.FrameworksAt(pid, dev, fwAt); fw.OK {
			r.Frameworks, r.FrameworksAt = fw.Frameworks, fw.T
		}
		if replay {
			if v, ok := st.ValueAt(store.Key{Dev: dev, PID: pid, Metric: store.Allocated}, t); ok {
				r.Allocated = &v
			}
			if v, ok := st.ValueAt(store.Key{Dev: dev, PID: pid, Metric: store.Reserved}, t); ok {
				r.Reserved = &v
			}
		} else if smp, ok := a.Last[dev]; ok {
			al, re := smp.Allocated, smp.Reserved
			r.Allocated, r.Reserved = &al, &re
		}
	}
	rows := make([]Process, 0, len(byPID))
	var ended []*Process // gone from NVML's list too
	for _, r := range byPID {
		if r.Ended && r.Used == nil {
			ended = append(ended, r)
			continue
		}
		rows = append(rows, *r)
	}
	sort.Slice(ended, func(i, j int) bool {
		if ended[i].EndedAt != ended[j].EndedAt {
			return ended[i].EndedAt > ended[j].EndedAt
		}
		return ended[i].PID < ended[j].PID
	})
	hidden := max(len(ended)-MaxEndedListed, 0)
	for _, r := range ended[:len(ended)-hidden] {
		rows = append(rows, *r)
	}
	for i := range rows {
		r := &rows[i]
		r.Label = st.PIDLabel(r.PID)
		if r.Used != nil && r.Reserved != nil && !r.UsedLast {
			d := int64(*r.Used) - int64(*r.Reserved)
			r.NonTorch = &d
		}
		if r.Allocated == nil {
			r.Stand = standIn(r.Frameworks) // a JAX or CuPy process
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].PID < rows[j].PID })
	if !replay {
		hidden += st.EndedForgotten(dev)
	}
	return rows, hidden
}

// ProcName is a short name for an agent process, from its Python
// sys.argv: "train.py --epochs 10"; "python -c" for code given with -c
// (sys.argv[0] is then "-c" and the rest are the code's own arguments).
func ProcName(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	if argv[0] == "-c" {
		return "python -c"
	}
	parts := []string{filepath.Base(argv[0])}
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "-") && len(parts) > 1 {
			break
		}
		parts = append(parts, filepath.Base(a))
		if len(parts) == 3 {
			break
		}
	}
	return strings.Join(parts, " ")
}
