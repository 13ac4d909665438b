// A process's forecast from what the store holds: its points (step rows,
// epoch rows, else windows of its allocated series), the memory it can
// have, and its holders walks. Live and replay alike: everything is read
// at a time.

package forecast

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gputop/gputop/store"
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

// rowCount is the unit and count a row's label gives, if any: "Step 100"
// (the Lightning and transformers callbacks' every_n_steps rows,
// gputop.snapshot(f"Step {n}")), "iter 7", "iteration: 7", "Epoch 3",
// any case, the number followed by the label's end or by no letter or
// digit; an OOM row gives none. Read by hand, not by an expression: every
// forecast reads hundreds of labels.
func rowCount(r *wire.Row) (Unit, float64, bool) {
	if r.Source == wire.SourceOOM || r.Allocated == nil {
		return 0, 0, false
	}
	l := strings.TrimLeft(r.Label, " \t")
	var u Unit
	switch {
	case hasWord(l, "iteration"):
		u, l = Steps, l[len("iteration"):]
	case hasWord(l, "iter"):
		u, l = Steps, l[len("iter"):]
	case hasWord(l, "step"):
		u, l = Steps, l[len("step"):]
	case hasWord(l, "epoch"):
		u, l = Epochs, l[len("epoch"):]
	default:
		return 0, 0, false
	}
	l = strings.TrimLeft(l, " \t")
	if l != "" && (l[0] == '#' || l[0] == ':') {
		l = strings.TrimLeft(l[1:], " \t")
	}
	d := 0
	for d < len(l) && l[d] >= '0' && l[d] <= '9' {
		d++
	}
	if d == 0 || d > 15 || (d < len(l) && isWordByte(l[d])) {
		return 0, 0, false
	}
	n, err := strconv.ParseFloat(l[:d], 64)
	return u, n, err == nil
}

// hasWord is whether l starts with w in any case.
func hasWord(l, w string) bool { return len(l) >= len(w) && strings.EqualFold(l[:len(w)], w) }

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// countedRow is a step or epoch row as a forecast reads it.
type countedRow struct {
	n      float64
	t      int64
	base   uint64
	peak   *uint64 // torch's peak counter at the row
	ledger *wire.Ledger
}

// processRows is what one pass over a process's rows, newest first, gives
// a forecast: its step and epoch rows (up to 2·MaxPoints of each, newest
// first), the newest cap a row says, and its end rows' holders walks.
type processRows struct {
	steps, epochs []countedRow
	cap           uint64 // 0: none said
	capFromOOM    bool
	capSeen       bool // a row said a limit (a cap, or the whole GPU)
	walks         []HolderWalk
}

// maxWalks bounds the holders walks a forecast reads.
const maxWalks = 64

// readRows reads process pid's rows on dev up to at in one pass, which
// stops once it has a full window of step rows: a forecast costs the
// same however long the run.
func readRows(st *store.Store, pid, dev int, at int64) processRows {
	var pr processRows
	st.VisitProcessRows(pid, dev, at, func(r *wire.Row) bool {
		if !pr.capSeen {
			switch {
			case r.Limit != nil && *r.Limit > 0:
				pr.cap, pr.capSeen = *r.Limit, true
			case r.OOM != nil && r.OOM.Limit > 0:
				pr.cap, pr.capFromOOM, pr.capSeen = r.OOM.Limit, true, true
			}
		}
		if h := r.Held; h != nil && h.Skipped == "" && len(h.Top) > 0 && len(pr.walks) < maxWalks {
			pr.walks = append(pr.walks, HolderWalk{T: h.T, Groups: h.Top})
		}
		if u, n, ok := rowCount(r); ok {
			c := countedRow{n: n, t: r.T, base: *r.Allocated, ledger: r.Ledger}
			if r.Peak != nil {
				pk := *r.Peak
				c.peak = &pk
			}
			switch {
			case u == Steps && len(pr.steps) < 2*MaxPoints:
				pr.steps = append(pr.steps, c)
			case u == Epochs && len(pr.epochs) < 2*MaxPoints:
				pr.epochs = append(pr.epochs, c)
			}
		}
		return len(pr.steps) < 2*MaxPoints
	})
	return pr
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
	pr := readRows(st, pid, dev, at)
	in := points(st, pid, dev, at, a.Hello.T, &pr)
	in.Limit, in.LimitFrom = limit(st, a, dev, at, live, &pr)
	in.Holders = walks(a, dev, at, pr.walks)
	return Predict(in)
}

// points are the forecast's points: the process's step rows when it has
// MinPoints of them, else its epoch rows, else windows of its allocated
// series since it attached (hello).
func points(st *store.Store, pid, dev int, at, hello int64, pr *processRows) Input {
	ps := rowPoints(st, pid, dev, pr.steps)
	if len(ps) >= MinPoints {
		return Input{Unit: Steps, Points: ps}
	}
	if es := rowPoints(st, pid, dev, pr.epochs); len(es) >= MinPoints {
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

// rowPoints makes points of rows (one unit's, newest first): each row's
// allocated as the baseline, the most allocated since the row before as
// its peak (torch's peak counter when it moved in between, which catches
// what the 100 Hz samples miss). A count that goes back (the counter was
// restarted) cuts the older rows; of two rows with one count the newer is
// kept. The points come oldest first.
func rowPoints(st *store.Store, pid, dev int, rows []countedRow) []Point {
	var keep []countedRow
	for _, r := range rows {
		if len(keep) > 0 {
			after := keep[len(keep)-1].n
			if r.n == after {
				continue
			}
			if r.n > after {
				break
			}
		}
		keep = append(keep, r)
		if len(keep) == MaxPoints {
			break
		}
	}
	pts := make([]Point, len(keep))
	k := store.Key{Dev: dev, PID: pid, Metric: store.Allocated}
	for i := range keep {
		r := &keep[len(keep)-1-i]
		p := Point{X: r.n, T: r.t, Base: r.base, Ledger: r.ledger}
		if i > 0 {
			prev := &keep[len(keep)-i]
			if v, ok := st.Max(k, prev.t, r.t+1); ok {
				p.Peak = v
			}
			if r.peak != nil && (prev.peak == nil || *r.peak != *prev.peak) {
				p.Peak = max(p.Peak, *r.peak)
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

// walks are the holders walks of a process on dev up to at, oldest
// first: its end rows' attributions (rows, newest first) and its latest
// holders report.
func walks(a *store.Agent, dev int, at int64, rows []HolderWalk) []HolderWalk {
	out := make([]HolderWalk, 0, len(rows)+1)
	for i := len(rows) - 1; i >= 0; i-- {
		out = append(out, rows[i])
	}
	if h := a.Holders; h != nil && h.T <= at && len(h.Groups) > 0 {
		if d, ok := a.DevMap[h.Dev]; ok && d == dev {
			out = append(out, HolderWalk{T: h.T, Groups: h.Groups})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}
