package present

import (
	"fmt"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// Query is what a screen asks the store about: a GPU, an instant and the
// chart's window.
type Query struct {
	Dev    int   // the selected GPU (a store device index); out of range means the first
	Now    int64 // the wall clock
	Cursor int64 // the instant shown: Now live, else the paused end or the replay cursor
	Replay bool  // the store holds a recording played at Cursor
	Paused bool  // live but frozen at Cursor
	// the chart's window [From, To) in Cols columns
	From, To int64
	Cols     int
	// the process the user picked (Picked), else the first attached agent
	// process is selected
	PID    int
	Picked bool
	// LargestFree: the chart shows the selected process's largest free
	// block in torch's cache (off by default: a key turns it on)
	LargestFree bool
	// Ledger: the chart shows the selected process's rows' ledgers as
	// stacked bars (Screen.Ledger) instead of its series
	Ledger bool
}

// atCursor is whether values are read at the cursor rather than as the
// latest ones: replay and a paused live screen.
func (q *Query) atCursor() bool { return q.Replay || q.Paused }

// Device is a GPU with NVML's used bytes at the cursor (nil: NVML has
// none).
type Device struct {
	store.Device
	Used *uint64
}

// SeriesKind says which figure a chart series is.
type SeriesKind int

const (
	NVMLUsed SeriesKind = iota
	TorchReserved
	TorchPeak
	TorchAllocated
	TorchLargestFree // the largest free block in torch's cache, from the agent's layout readings
	// a process without torch figures: its framework's in-use and held
	// (Process.Stand: JAX's bytes_in_use and pool_bytes, CuPy's
	// used_bytes and total_bytes), named so in the legend
	FrameworkInUse
	FrameworkReserved
)

// LargestFreeSeries is the name of the chart's largest free block, with
// its source: the agent reads torch's cache about once a second.
const LargestFreeSeries = "largest free block (torch's allocator, read ~1/s)"

// Series is one line of the chart: its aggregated columns over the window
// (min/max/last per column), never raw samples.
type Series struct {
	Kind SeriesKind
	Name string // legend label with its source, e.g. "allocated (torch)"
	Cols []store.Column
	Hold *uint64 // value at the window's left edge (the last sample before it)
	Now  *uint64 // value at the cursor
}

// Screen is everything a frame shows, joined: the same for live and replay.
type Screen struct {
	Devices []Device
	Hosts   []store.Host // the remote hosts (gputop --ssh), with their state
	Dev     int          // the selected GPU (the query's, or 0 when it was out of range)
	Procs   []Process    // the processes on Dev, by pid
	// ended agent processes on Dev not in Procs: past MaxEndedListed, or
	// forgotten by the store (KeepEnded)
	EndedHidden int
	Selected    int  // index into Procs, -1 when there is none
	Picked      bool // the query's pick is still on this GPU
	// torch's cache of the selected process on Dev at the cursor (live:
	// its newest layout reading); nil without an agent or a reading
	Cache *Cache

	// the forecast of each agent process on Dev (forecast.On), by pid
	Forecasts []forecast.Process

	Rows     summary.DeviceRows // Dev's summary rows visible at the cursor
	AllRows  int                // rows in all, every GPU
	Bounds   store.Bounds       // what the bounds on rows left out
	Start    int64              // the run's start
	NVMLPeak *uint64            // Dev's highest NVML used up to the cursor
	// the highest torch peak of the agent processes on Dev up to the
	// cursor, and whose
	TorchPeak      *uint64
	TorchPeakPID   int
	TorchPeakLabel string // that pid as the process pane shows it ("host:1234" for a remote one)

	From, To int64          // the chart's window
	Series   []Series       // the chart's: NVML used when sampled, torch's for a selected agent process
	Note     string         // what the chart lacks and why, e.g. "allocator: no agent attached"
	Markers  []store.Marker // Dev's markers in the window, in time order
	// the chart's stacked view (Query.Ledger): the selected process's rows
	// with a ledger in the window, in time order, or what it lacks
	Ledger     []LedgerBar
	LedgerNote string
}

// SelectedProcess returns the selected process, if any.
func (s *Screen) SelectedProcess() (Process, bool) {
	if s.Selected < 0 {
		return Process{}, false
	}
	return s.Procs[s.Selected], true
}

// Presenter answers Queries and keeps what it can between frames: the rows
// until they change, the run peaks extended by new samples only.
type Presenter struct {
	rows       Rows
	forecasts  forecasts
	nvmlPeak   peak
	torchPeaks map[int]*peak
}

// NewPresenter returns a Presenter with nothing kept yet.
func NewPresenter() *Presenter { return &Presenter{torchPeaks: map[int]*peak{}} }

// Screen answers q from st.
func (p *Presenter) Screen(st *store.Store, q Query) Screen {
	s := Screen{Start: st.Start()}
	devs := st.Devices()
	s.Dev = q.Dev
	if s.Dev >= len(devs) || s.Dev < 0 {
		s.Dev = 0
	}
	s.Devices = make([]Device, len(devs))
	for i, d := range devs {
		s.Devices[i] = Device{Device: d, Used: valueAt(st, &q, store.Key{Dev: i, Metric: store.NVMLUsed})}
	}

	s.Hosts = st.Hosts()
	s.Procs, s.EndedHidden = Processes(st, s.Dev, q.Cursor, q.Replay)
	s.Selected, s.Picked = pick(s.Procs, q.PID, q.Picked)
	if sel, ok := s.SelectedProcess(); ok {
		s.Cache = cacheOf(st, &q, s.Dev, sel)
	}

	s.Forecasts = p.forecasts.get(st, &q, s.Dev)
	s.Rows, s.AllRows = p.rows.Get(st, q.Replay, q.Cursor, devs, s.Dev)
	s.Bounds = st.Bounds()
	end := st.End() + 1
	if q.atCursor() {
		end = q.Cursor + 1
	}
	if v, ok := p.nvmlPeak.get(st, store.Key{Dev: s.Dev, Metric: store.NVMLUsed}, s.Start, end); ok {
		s.NVMLPeak = &v
	}
	// the peaks of processes no longer listed go, or a node that ran
	// thousands of jobs would keep one for each
	listed := make(map[int]bool, len(s.Procs))
	for _, r := range s.Procs {
		listed[r.PID] = r.Agent
	}
	for pid := range p.torchPeaks {
		if !listed[pid] {
			delete(p.torchPeaks, pid)
		}
	}
	for _, r := range s.Procs {
		if !r.Agent {
			continue
		}
		pc := p.torchPeaks[r.PID]
		if pc == nil {
			pc = &peak{}
			p.torchPeaks[r.PID] = pc
		}
		if v, ok := pc.get(st, store.Key{Dev: s.Dev, PID: r.PID, Metric: store.Peak}, s.Start, end); ok && (s.TorchPeak == nil || v > *s.TorchPeak) {
			vv := v
			s.TorchPeak, s.TorchPeakPID, s.TorchPeakLabel = &vv, r.PID, r.Label
		}
	}
	s.chart(st, &q)
	if q.Ledger {
		s.ledgerBars(&q)
	}
	return s
}

// chart fetches the chart's columns for the window: NVML used of the
// device and, for the selected process when it has an agent, torch's
// reserved, peak and allocated, and the largest free block in its cache
// when the query asks for it (a process with no torch figures and a
// framework's: that framework's in-use and held, named by it). A series without a source is left out (the
// note says why), never drawn as zeros.
func (s *Screen) chart(st *store.Store, q *Query) {
	series := func(kind SeriesKind, name string, k store.Key) {
		sr := Series{Kind: kind, Name: name, Cols: st.Columns(k, q.From, q.To, q.Cols), Now: valueAt(st, q, k)}
		if v, ok := st.ValueAt(k, q.From); ok {
			sr.Hold = &v
		}
		s.Series = append(s.Series, sr)
	}
	note := ""
	nvmlKey := store.Key{Dev: s.Dev, Metric: store.NVMLUsed}
	if st.Count(nvmlKey) > 0 {
		name := "NVML used (driver)"
		if s.Dev < len(s.Devices) && s.Devices[s.Dev].Memory == wire.MemorySystem {
			name = "system memory used (unified: /proc/meminfo)" // NVML has no figure of its own for it
		}
		series(NVMLUsed, name, nvmlKey)
	} else {
		note = "NVML: no samples for this GPU  "
	}
	agentsHere := 0
	for _, r := range s.Procs {
		if r.Agent {
			agentsHere++
		}
	}
	sel, selOK := s.SelectedProcess()
	switch {
	case selOK && sel.Agent && sel.Stand != nil && st.Count(store.Key{Dev: s.Dev, PID: sel.PID, Metric: store.Allocated}) == 0:
		// a JAX or CuPy process: its framework's figures, in its names
		k := store.Key{Dev: s.Dev, PID: sel.PID}
		if re := sel.Stand.Reserved; re != nil {
			k.Metric = store.FrameworkReserved
			series(FrameworkReserved, "held ("+sel.Stand.Name+" "+re.Native+")", k)
		}
		k.Metric = store.FrameworkInUse
		series(FrameworkInUse, "in use ("+sel.Stand.Name+" "+sel.Stand.InUse.Native+")", k)
		note += "pid " + sel.Label
		if sel.Ended {
			note += " " + sel.Status
		}
	case selOK && sel.Agent:
		k := store.Key{Dev: s.Dev, PID: sel.PID}
		k.Metric = store.Reserved
		series(TorchReserved, "reserved (torch)", k)
		k.Metric = store.Peak
		series(TorchPeak, "peak (torch)", k)
		k.Metric = store.Allocated
		series(TorchAllocated, "allocated (torch)", k)
		if q.LargestFree {
			k.Metric = store.LargestFree
			series(TorchLargestFree, LargestFreeSeries, k)
		}
		note += "pid " + sel.Label
		if sel.NSLocal {
			note += " (pid inside another pid namespace)"
		}
		if sel.Ended {
			note += " " + sel.Status
		}
	case agentsHere > 0 && selOK:
		note += fmt.Sprintf("allocator: pid %s has no agent (select an attached process)", sel.Label)
	default:
		note += "allocator: no agent attached"
	}
	s.Note, s.From, s.To = note, q.From, q.To
	s.Markers = st.MarkersIn(s.Dev, q.From, q.To) // in time order
}

// pick is the selected row: the pid the user picked while it is there,
// else the first attached agent process, whose allocator series are the
// interesting ones, else the first agent process, else the first row.
func pick(rows []Process, pid int, picked bool) (int, bool) {
	if picked {
		for i, r := range rows {
			if r.PID == pid {
				return i, true
			}
		}
	}
	for i, r := range rows {
		if r.Agent && !r.Ended {
			return i, false
		}
	}
	for i, r := range rows {
		if r.Agent {
			return i, false
		}
	}
	if len(rows) > 0 {
		return 0, false
	}
	return -1, false
}

// valueAt returns a series' value at the cursor (replay, paused) or its
// latest value (live).
func valueAt(st *store.Store, q *Query, k store.Key) *uint64 {
	var v uint64
	var ok bool
	if q.atCursor() {
		v, ok = st.ValueAt(k, q.Cursor)
	} else {
		v, _, ok = st.Latest(k)
	}
	if !ok {
		return nil
	}
	return &v
}

// peak extends a run peak with only the samples added since the last
// frame, instead of scanning the whole run each frame.
type peak struct {
	key      store.Key
	from, to int64
	v        uint64
	ok       bool
}

func (p *peak) get(st *store.Store, k store.Key, from, to int64) (uint64, bool) {
	if p.key != k || p.from != from || to < p.to {
		*p = peak{key: k, from: from, to: from}
	}
	if to > p.to {
		if v, ok := st.Max(k, p.to, to); ok && (!p.ok || v > p.v) {
			p.v, p.ok = v, true
		}
		p.to = to
	}
	return p.v, p.ok
}
