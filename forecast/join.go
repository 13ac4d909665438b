// A process's forecast from what the store holds: its points (step rows,
// epoch rows, else windows of its allocated series), the memory it can
// have, and its holders walks. Live and replay alike: everything is read
// at a time.

package forecast

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Where a forecast in time finds its points: windows of the allocated
// series over the last TimeSpan (or since the agent attached and WarmUp
// passed: a model and its optimizer being loaded are no leak), each at
// least TimeWindow wide, at most MaxWindows of them.
const (
	TimeSpan   = 30 * time.Minute
	TimeWindow = 10 * time.Second
	MaxWindows = 30
	WarmUp     = 10 * time.Second
	// MinWindows is the fewest windows a forecast in time is made from:
	// two minutes, so that a model loading for a minute is seen to level
	// off before the forecast speaks
	MinWindows = 12
)

// counted reads a row's label as a count of steps or epochs: "Step 100"
// (the Lightning and transformers callbacks' every_n_steps rows,
// gputop.snapshot(f"Step {n}")), "iter 7", "Epoch 3".
var counted = regexp.MustCompile(`(?i)^\s*(step|iter|iteration|epoch)\s*[#:]?\s*(\d{1,15})\b`)

// rowCount is the unit and count a row's label gives, if any; an OOM row
// gives none.
func rowCount(r *wire.Row) (Unit, float64, bool) {
	if r.Source == wire.SourceOOM || r.Allocated == nil {
		return 0, 0, false
	}
	m := counted.FindStringSubmatch(r.Label)
	if m == nil {
		return 0, 0, false
	}
	n, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return 0, 0, false
	}
	if m[1][0] == 'e' || m[1][0] == 'E' {
		return Epochs, n, true
	}
	return Steps, n, true
}

// Process is one process-device's forecast.
type Process struct {
	PID   int    // the store's pid key
	Label string // the pid as shown ("host:1234" for a remote host's)
	Dev   int    // the store's device
	Forecast
}

// All is the forecast of every agent process on every device it uses at
// time at. Live: the connected agents, with NVML's process lists as they
// are now; else every agent attached by at, one that ended before at
// forecast at its end (an export's view of a whole recording). In pid and
// device order.
func All(st *store.Store, at int64, live bool) []Process {
	return collect(st, at, live, func(*store.Agent, int) bool { return true })
}

// On is the forecast of the agent processes on device dev at time at, as a
// screen shows them: live, the connected ones; in replay, those attached
// at the cursor (at).
func On(st *store.Store, dev int, at int64, live bool) []Process {
	return collect(st, at, live, func(a *store.Agent, d int) bool {
		return d == dev && (live || a.EndedAt == 0 || a.EndedAt > at)
	})
}

// collect is the forecast of each agent process-device keep accepts.
func collect(st *store.Store, at int64, live bool, keep func(*store.Agent, int) bool) []Process {
	var out []Process
	agents := st.Agents()
	for i := range agents {
		a := &agents[i]
		if (live && !a.Connected) || a.Hello.T > at {
			continue
		}
		devs := make([]int, 0, len(a.DevMap))
		for _, d := range a.DevMap {
			devs = append(devs, d)
		}
		sort.Ints(devs)
		for _, d := range devs {
			if keep(a, d) {
				out = append(out, Process{PID: a.Hello.PID, Label: st.PIDLabel(a.Hello.PID), Dev: d, Forecast: For(st, a, d, at, live)})
			}
		}
	}
	return out
}

// For is the forecast of agent a's process on store device dev at time at
// (an ended process: at its end); live reads NVML's process list as it is
// now, else NVML's per-process series at.
func For(st *store.Store, a *store.Agent, dev int, at int64, live bool) Forecast {
	pid := a.Hello.PID
	if !a.Connected && a.EndedAt > 0 {
		at = min(at, a.EndedAt)
	}
	in := points(st, pid, dev, at, a.Hello.T)
	in.Limit, in.LimitFrom = limit(st, a, dev, at, live)
	in.Holders = walks(st, a, dev, at)
	return Predict(in)
}

// points are the forecast's points: the process's step rows when it has
// MinPoints of them, else its epoch rows, else windows of its allocated
// series since it attached (hello).
func points(st *store.Store, pid, dev int, at, hello int64) Input {
	rows := st.ProcessRows(pid, dev, at, 4*MaxPoints, func(r *wire.Row) bool { _, _, ok := rowCount(r); return ok })
	var steps, epochs []wire.Row
	for _, r := range rows {
		if u, _, _ := rowCount(&r); u == Steps {
			steps = append(steps, r)
		} else {
			epochs = append(epochs, r)
		}
	}
	ps := rowPoints(st, pid, dev, steps)
	if len(ps) >= MinPoints {
		return Input{Unit: Steps, Points: ps}
	}
	if es := rowPoints(st, pid, dev, epochs); len(es) >= MinPoints {
		return Input{Unit: Epochs, Points: es}
	}
	in := Input{Unit: Seconds, Points: windows(st, pid, dev, at, hello)}
	if len(in.Points) == 0 {
		need := Duration(MinWindows*TimeWindow.Seconds() + WarmUp.Seconds())
		in.Have = fmt.Sprintf("%d of %d step rows; a forecast in time needs %s of samples", len(ps), MinPoints, need)
		if len(ps) == 0 {
			in.Have = "no step rows; a forecast in time needs " + need + " of samples"
		}
	}
	return in
}

// rowPoints makes points of rows (one unit's, in time order): each row's
// allocated as the baseline, the most allocated since the row before as
// its peak (torch's peak counter when it moved in between, which catches
// what the 100 Hz samples miss). A count that goes back (the counter was
// restarted) cuts the older rows; of two rows with one count the newer is
// kept.
func rowPoints(st *store.Store, pid, dev int, rows []wire.Row) []Point {
	var keep []wire.Row
	for i := len(rows) - 1; i >= 0; i-- {
		_, n, _ := rowCount(&rows[i])
		if len(keep) > 0 {
			_, after, _ := rowCount(&keep[len(keep)-1])
			if n == after {
				continue
			}
			if n > after {
				break
			}
		}
		keep = append(keep, rows[i])
		if len(keep) == MaxPoints {
			break
		}
	}
	pts := make([]Point, len(keep))
	k := store.Key{Dev: dev, PID: pid, Metric: store.Allocated}
	for i := range keep {
		r := &keep[len(keep)-1-i]
		_, n, _ := rowCount(r)
		p := Point{X: n, T: r.T, Base: *r.Allocated, Ledger: r.Ledger}
		if i > 0 {
			prev := &keep[len(keep)-i]
			if v, ok := st.Max(k, prev.T, r.T+1); ok {
				p.Peak = v
			}
			if r.Peak != nil && (prev.Peak == nil || *r.Peak != *prev.Peak) {
				p.Peak = max(p.Peak, *r.Peak)
			}
		}
		pts[i] = p
	}
	return pts
}

// windows are points of the allocated series: the least (the baseline)
// and the most (the peak) of each window of time before at.
func windows(st *store.Store, pid, dev int, at, hello int64) []Point {
	from := max(at-int64(TimeSpan), hello+int64(WarmUp))
	span := at - from
	n := min(int(span/int64(TimeWindow)), MaxWindows)
	if n < MinWindows {
		return nil
	}
	cols := st.Columns(store.Key{Dev: dev, PID: pid, Metric: store.Allocated}, from, at, n)
	var pts []Point
	for i, c := range cols {
		if !c.OK {
			continue
		}
		end := from + span*int64(i+1)/int64(n)
		pts = append(pts, Point{X: float64(end-from) / 1e9, T: end, Base: c.Min, Peak: c.Max})
	}
	return pts
}

// limit is the memory process a can have for its allocations on dev:
// the GPU's total (torch's, from the hello, else NVML's) less what the
// other processes use and what the process itself uses outside torch
// (NVML's figure for it less torch's reserved), and no more than the cap
// set_per_process_memory_fraction set, as the newest row that says it
// gives it (a mark's, read with the counters; an OOM's). It says where the
// figure comes from.
func limit(st *store.Store, a *store.Agent, dev int, at int64, live bool) (uint64, string) {
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
	caps := st.ProcessRows(pid, dev, at, 1, func(r *wire.Row) bool {
		return (r.Limit != nil && *r.Limit > 0) || (r.OOM != nil && r.OOM.Limit > 0)
	})
	if len(caps) == 1 {
		r := &caps[0]
		c, said := uint64(0), "the cap set_per_process_memory_fraction set"
		if r.Limit != nil {
			c = *r.Limit
		} else {
			c, said = r.OOM.Limit, said+", as its OOM said"
		}
		if (total == 0 || c < total) && (lim == 0 || c < lim) {
			lim, from = c, said
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

// walks are the holders walks of a process on dev up to at, oldest
// first: its end rows' attributions and its latest holders report.
func walks(st *store.Store, a *store.Agent, dev int, at int64) []HolderWalk {
	pid := a.Hello.PID
	var out []HolderWalk
	for _, r := range st.ProcessRows(pid, dev, at, 64, func(r *wire.Row) bool {
		return r.Held != nil && r.Held.Skipped == "" && len(r.Held.Top) > 0
	}) {
		out = append(out, HolderWalk{T: r.Held.T, Groups: r.Held.Top})
	}
	if h := a.Holders; h != nil && h.T <= at && len(h.Groups) > 0 {
		if d, ok := a.DevMap[h.Dev]; ok && d == dev {
			out = append(out, HolderWalk{T: h.T, Groups: h.Groups})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
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
