// Package alert runs a command of the user's (--alert CMD) when something
// needs a person: a process's forecast falls under a threshold, a CUDA
// out-of-memory error, an end row's verdict is ✗. A Watcher reads the
// store once a second (it never writes it) and hands each event to a
// runner (run.go) that runs the command with the event as JSON on its
// standard input (event.go), rate-limited, a bounded number at once, each
// with a timeout, never blocking the rest of gputop.
package alert

import (
	"fmt"
	"sync"
	"time"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// The defaults of Options, and the bounds that are not options.
const (
	DefaultSteps   = 100              // a forecast of an OOM within this many steps
	DefaultWithin  = 10 * time.Minute // or within this long
	DefaultEvery   = time.Minute      // one command per event kind and process in this long
	DefaultTimeout = 30 * time.Second // a command still running then is killed
	MaxRunning     = 4                // commands running at once; past it events are dropped
	// StopWait is how long gputop, ending, waits for the commands still
	// running before it kills them.
	StopWait = 5 * time.Second
	// AskEvery: while a process's forecast predicts an OOM, its agent is
	// asked for a holders walk (Options.Ask) at most this often, so that
	// the cause names what holds the growing memory (two walks apart: the
	// holder that grew between them).
	AskEvery = 5 * time.Minute
	// maxPending bounds the end rows waiting for their verdict (their
	// holders walk) that a watcher follows: past it the oldest is let go.
	maxPending = 256
	// maxNewRows bounds the rows one look reads: past it (a flood of rows
	// within a second) the oldest new rows go unseen.
	maxNewRows = 4096
)

// Options say what runs and when. Zero values take the defaults; Steps
// or Within below zero turn that threshold off.
type Options struct {
	Command string // run with sh -c ("": none; the watcher only asks for walks)
	// a forecast fires when the OOM it predicts is within Steps steps
	// (a forecast counting steps) or Within (any forecast whose time to
	// the OOM is known)
	Steps  float64
	Within time.Duration
	// at most one command per event kind, process and GPU each Every;
	// at most MaxRunning at once; each killed after Timeout
	Every      time.Duration
	MaxRunning int
	Timeout    time.Duration
	Poll       time.Duration // how often the store is read (default 1 s)
	// Ask asks the agent of pid for a holders walk of torch device dev
	// (agentlink's RequestHeld), without waiting; nil: never asked
	Ask func(pid, dev int) error
	Log func(string)     // gputop's log: what ran, what failed, what was dropped
	Now func() time.Time // time.Now when nil
}

// Stats count a watcher's commands.
type Stats struct {
	Ran, Dropped, Failed int
}

// Watcher watches a store for events and runs the command for each.
type Watcher struct {
	st  *store.Store
	opt Options
	run *runner

	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}

	// the watcher's goroutine's own, and look's under Stop
	lastMade uint64               // rows made when last looked (store.Shape.RowsMade)
	lastRows uint64               // store.Shape.Rows then
	pending  []wire.Row           // end rows waiting for their verdict
	under    map[[2]int]bool      // process-devices whose forecast is under a threshold
	asked    map[[2]int]time.Time // when each process-device's agent was last asked for a walk
}

// Start starts watching st; Stop ends it.
func Start(st *store.Store, opt Options) *Watcher {
	if opt.Steps == 0 {
		opt.Steps = DefaultSteps
	}
	if opt.Within == 0 {
		opt.Within = DefaultWithin
	}
	if opt.Every <= 0 {
		opt.Every = DefaultEvery
	}
	if opt.MaxRunning <= 0 {
		opt.MaxRunning = MaxRunning
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Log == nil {
		opt.Log = func(string) {}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	w := &Watcher{st: st, opt: opt, run: newRunner(opt), quit: make(chan struct{}), done: make(chan struct{}),
		under: map[[2]int]bool{}, asked: map[[2]int]time.Time{}}
	go w.loop()
	return w
}

func (w *Watcher) loop() {
	defer close(w.done)
	t := time.NewTicker(w.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
			w.look()
		}
	}
}

// Stop looks once more (what came since the last look), waits up to
// StopWait for the commands still running, kills the rest, and returns the
// counts. Later calls return the same.
func (w *Watcher) Stop() Stats {
	w.stopOnce.Do(func() {
		close(w.quit)
		<-w.done
		w.look()
		w.run.stop(StopWait)
	})
	return w.Stats()
}

// Stats are the commands run, dropped and failed so far.
func (w *Watcher) Stats() Stats {
	w.run.mu.Lock()
	defer w.run.mu.Unlock()
	return w.run.stats
}

// look finds the events since the last look and fires them.
func (w *Watcher) look() {
	sh := w.st.Shape()
	var devs []store.Device
	devices := func() []store.Device {
		if devs == nil {
			devs = w.st.Devices()
		}
		return devs
	}
	if sh.RowsMade != w.lastMade {
		if skip := sh.RowsMade - w.lastMade; skip > maxNewRows {
			w.opt.Log(fmt.Sprintf("alert: %d rows came between two looks; the oldest %d were not looked at (at most %d a look)",
				skip, skip-maxNewRows, maxNewRows))
		}
		n := int(min(sh.RowsMade-w.lastMade, maxNewRows))
		for _, r := range w.st.LastRows(n) {
			if r.ID <= w.lastMade {
				continue // an older row: the new ones were deleted
			}
			switch {
			case r.Source == wire.SourceOOM:
				w.run.fire(oomEvent(w.st, devices(), r), r.PID)
			case r.End:
				w.pending = append(w.pending, r)
			}
		}
		w.lastMade = sh.RowsMade
	}
	if sh.Rows != w.lastRows && len(w.pending) > 0 {
		w.verdicts(devices())
	}
	w.lastRows = sh.Rows
	w.forecasts(devices)
}

// verdicts fires for the end rows whose verdict is ✗ and lets go of those
// judged otherwise; those still waiting for their holders walk wait on.
func (w *Watcher) verdicts(devs []store.Device) {
	keep := w.pending[:0]
	for _, p := range w.pending {
		rows := w.st.ProcessRows(p.PID, p.Dev, p.T, 1, func(r *wire.Row) bool { return r.ID == p.ID })
		if len(rows) == 0 {
			continue // deleted, or dropped past the store's bound
		}
		r := rows[0]
		v := summary.Judge(r, wire.Row{}, false)
		switch v.Status {
		case summary.Leaked:
			w.run.fire(verdictEvent(w.st, devs, r, v), r.PID)
		case summary.Pending:
			keep = append(keep, r)
		}
	}
	if len(keep) > maxPending {
		w.opt.Log(fmt.Sprintf("alert: %d end rows wait for their holders walk; the oldest %d are no longer followed (at most %d)",
			len(keep), len(keep)-maxPending, maxPending))
		keep = append(keep[:0], keep[len(keep)-maxPending:]...)
	}
	w.pending = keep
}

// forecasts fires for each connected process whose forecast falls under
// a threshold, once until it is over it again, and asks the agent of each
// whose forecast predicts an OOM for a holders walk, at most once every
// AskEvery.
func (w *Watcher) forecasts(devices func() []store.Device) {
	now := w.opt.Now()
	seen := map[[2]int]bool{}
	for _, p := range forecast.All(w.st, now.UnixNano(), true) {
		k := [2]int{p.PID, p.Dev}
		seen[k] = true
		under := w.isUnder(p.Forecast)
		if under && !w.under[k] {
			w.run.fire(forecastEvent(w.st, devices(), p, now.UnixNano()), p.PID)
		}
		w.under[k] = under
		if p.Status == forecast.OOM && w.opt.Ask != nil {
			if last, ok := w.asked[k]; !ok || now.Sub(last) >= AskEvery {
				w.asked[k] = now
				w.ask(p)
			}
		}
	}
	for k := range w.under {
		if !seen[k] {
			delete(w.under, k)
			delete(w.asked, k)
		}
	}
}

// ask asks p's agent for a holders walk of p's device.
func (w *Watcher) ask(p forecast.Process) {
	who := fmt.Sprintf("pid %s on GPU %d", p.Label, p.Dev)
	for _, a := range w.st.Agents() {
		if a.Hello.PID != p.PID {
			continue
		}
		for td, d := range a.DevMap {
			if d != p.Dev {
				continue
			}
			if err := w.opt.Ask(p.PID, td); err != nil {
				w.opt.Log(who + ": its forecast says OOM; could not ask its agent for a holders walk: " + err.Error())
			} else {
				w.opt.Log(who + ": its forecast says OOM; asked its agent for a holders walk, to name what holds the growing memory")
			}
			return
		}
	}
}

// isUnder is whether a forecast predicts an OOM within a threshold.
func (w *Watcher) isUnder(f forecast.Forecast) bool {
	if f.Status != forecast.OOM || f.Limit == 0 {
		return false
	}
	if f.Unit == forecast.Steps && w.opt.Steps > 0 && f.In <= w.opt.Steps {
		return true
	}
	s, ok := f.SecondsToOOM()
	return ok && w.opt.Within > 0 && s <= w.opt.Within.Seconds()
}
