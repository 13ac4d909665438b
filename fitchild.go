// One child of gputop fit: CMD with one value, the agent injected as
// gputop run injects it and the allocator capped, watched through a live
// session of its own until its peak holds, it runs out of memory, it ends
// or --max-seconds pass; then stopped, its whole process group.

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gputop/gputop/fit"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/runner"
	"github.com/gputop/gputop/session"
	"github.com/gputop/gputop/units"
)

// fitOutputLines bounds the lines of a child's output kept (the last ones
// go into the report when it fails)
const fitOutputLines = 200

// why the watch stopped a child
const (
	stopNone        = ""
	stopStable      = "stable"
	stopOOM         = "oom"
	stopMax         = "max"
	stopInterrupted = "interrupted"
)

// child runs CMD with value v and returns what it measured, and the
// memory caps its processes set.
func (f *fitFlags) child(ctx context.Context, tmpl []string, v int, stderr io.Writer) (fit.Run, []runner.Cap) {
	argv := fit.Expand(tmpl, v)
	run := fit.Run{Value: v}
	say(stderr, fmt.Sprintf("gputop fit: %d: %s", v, strings.Join(argv, " ")))
	defer func() { say(stderr, fmt.Sprintf("gputop fit: %d: %s", v, runLine(run))) }()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		run.Status, run.Why = fit.StatusFailed, fmt.Sprintf("%s: %v", argv[0], lookErr(err))
		return run, nil
	}
	exe, _ := os.Executable()
	inj, err := runner.Prepare(runner.FindAgent(exe))
	if err != nil {
		run.Status, run.Why = fit.StatusFailed, err.Error()
		return run, nil
	}
	defer inj.Remove()
	w := fit.NewWatch(fit.Rule{Steps: f.stableSteps, Seconds: seconds(f.stableSecs)})
	ses, err := session.Start(context.Background(), session.Options{Log: logbook.New(), Agents: true, Socket: inj.Socket, Tap: w})
	if err != nil {
		run.Status, run.Why = fit.StatusFailed, "cannot listen for the child's agent: "+firstLine(err.Error())
		return run, nil
	}

	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	capSpec := "free"
	if f.limit > 0 {
		capSpec = strconv.FormatUint(f.limit, 10)
	}
	cmd.Env = append(inj.Env(os.Environ()), "GPUTOP_MEMORY_CAP="+capSpec)
	// a group of its own: the stop signals reach what it started (torchrun's
	// ranks, a DataLoader's workers), and a Ctrl-C on the terminal reaches
	// gputop alone, which stops the child and still reports
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &runner.Output{Keep: fitOutputLines}
	var sink io.Writer = out
	if f.showOutput {
		sink = io.MultiWriter(out, stderr)
	}
	cmd.Stdout, cmd.Stderr = sink, sink
	// a process the child left behind holding its output must not hold
	// the report back
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		ses.Stop()
		run.Status, run.Why = fit.StatusFailed, startErr(cmd, err)
		return run, nil
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()

	stop, at := f.watch(ctx, w, start, done)
	ended := ""
	select {
	case <-done:
	default:
		ended = stopGroup(cmd.Process.Pid, done, seconds(f.stopSecs))
	}
	if killGroup(cmd.Process.Pid) {
		run.Notes = append(run.Notes, "processes it left in its process group were killed")
	}
	run.Seconds = math.Round(time.Since(start).Seconds()*10) / 10
	drainAgents(ses.Store(), time.Second)
	ses.Stop()
	ev := inj.Events()
	f.classify(&run, w.State(time.Now()), at, stop, ended, cmd.ProcessState)
	if run.Status == fit.StatusFailed {
		if len(ses.Store().Agents()) == 0 {
			for _, l := range agentSummary(ses.Store(), agentInjection{inj: inj, on: true}) {
				run.Notes = append(run.Notes, strings.TrimSuffix(l, "; NVML only"))
			}
		}
		run.Output, _ = out.Tail(0, fit.MaxOutputLines)
	}
	return run, ev.Caps
}

// watch waits until the child's peak is stable, it runs out of memory, it
// ends, --max-seconds pass or gputop fit is interrupted, and says which
// (stopNone: it ended), with the child's state then.
func (f *fitFlags) watch(ctx context.Context, w *fit.Watch, start time.Time, done <-chan struct{}) (string, fit.State) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := seconds(f.maxSecs)
	for {
		select {
		case <-done:
			return stopNone, w.State(time.Now())
		case <-ctx.Done():
			return stopInterrupted, w.State(time.Now())
		case now := <-tick.C:
			switch st := w.State(now); {
			case st.Phase == fit.OutOfMemory:
				return stopOOM, st
			case st.Phase == fit.Stable:
				return stopStable, st
			case now.Sub(start) >= limit:
				return stopMax, st
			}
		}
	}
}

// classify fills run from the watch's final state st (the peak, the
// steps, an OOM that came as it stopped), its state at the moment it
// stopped the child (at: what the hold was then), why it stopped it and
// how the child ended.
func (f *fitFlags) classify(run *fit.Run, st, at fit.State, stop, ended string, ps *os.ProcessState) {
	run.Peak, run.ReservedPeak, run.Steps, run.Ledger = st.Peak, st.ReservedPeak, st.Steps, st.Ledger
	code, how := -1, "still running"
	if ps != nil {
		code, how = runner.Ended(ps)
	}
	run.Ended = ended
	if ended == "" {
		run.Ended = how
	}
	if o := st.OOM; o != nil {
		run.OOM = &fit.OOM{Requested: o.Requested, Allocated: o.Allocated, Limit: o.Limit}
	}
	switch {
	case stop == stopInterrupted:
		run.Status, run.Why = fit.StatusInterrupted, "gputop fit was interrupted"
	case st.OOM != nil:
		run.Status, run.Why = fit.StatusOOM, "ran out of memory"
	case stop == stopStable:
		run.Status, run.Why = fit.StatusFit, at.Why
		if st.Peak > at.Peak {
			// stopping took a moment: what it allocated meanwhile is kept, and said
			run.Notes = append(run.Notes, fmt.Sprintf("the peak rose by %s while the child was being stopped", units.Bytes(st.Peak-at.Peak)))
		}
	case stop == stopMax && st.Agents == 0:
		run.Status, run.Why = fit.StatusFailed, fmt.Sprintf("no agent attached within --max-seconds %g", f.maxSecs)
	case stop == stopMax && st.Peak == 0:
		run.Status, run.Why = fit.StatusFailed, fmt.Sprintf("nothing allocated within --max-seconds %g", f.maxSecs)
	case stop == stopMax:
		run.Status = fit.StatusUnstable
		run.Why = fmt.Sprintf("the peak still rose at --max-seconds %g (it last rose %s before, %d steps)",
			f.maxSecs, at.HeldFor.Round(100*time.Millisecond), at.HeldSteps)
	case code == 0 && st.Peak > 0:
		run.Status = fit.StatusFit
		run.Why = fmt.Sprintf("it ended before the peak was stable (held %d steps, %s): its peak then",
			st.HeldSteps, st.HeldFor.Round(100*time.Millisecond))
	case code == 0 && st.Agents == 0:
		run.Status, run.Why = fit.StatusFailed, "it ended with no agent attached"
	case code == 0:
		run.Status, run.Why = fit.StatusFailed, "it ended having allocated nothing"
	default:
		run.Status, run.Why = fit.StatusFailed, "it "+how
	}
}

// stopGroup stops the process group of pid: SIGINT, then SIGTERM, then
// SIGKILL, each given wait; it says how the child ended.
func stopGroup(pid int, done <-chan struct{}, wait time.Duration) string {
	ignored := ""
	for _, sig := range []unix.Signal{unix.SIGINT, unix.SIGTERM} {
		unix.Kill(-pid, sig)
		select {
		case <-done:
			return "stopped with " + unix.SignalName(sig) + ignored
		case <-time.After(wait):
		}
		if ignored == "" {
			ignored = fmt.Sprintf(" (it ignored SIGINT for %s)", wait)
		} else {
			ignored = fmt.Sprintf(" (it ignored SIGINT and SIGTERM, %s each)", wait)
		}
	}
	unix.Kill(-pid, unix.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second): // in the kernel's hands (an uninterruptible wait)
		return "sent SIGKILL, and still not gone after 10 s" + ignored
	}
	return "killed with SIGKILL" + ignored
}

// killGroup kills what is left of pid's process group once pid has gone,
// and says whether anything was.
func killGroup(pid int) bool {
	if unix.Kill(-pid, 0) != nil {
		return false
	}
	unix.Kill(-pid, unix.SIGKILL)
	return true
}

// runLine is a run's progress line on stderr.
func runLine(r fit.Run) string {
	s := r.Status
	switch {
	case r.OOM != nil:
		s += ", needs more than " + units.Bytes(r.OOM.Limit)
	case r.Peak > 0:
		s += ", peak " + units.Bytes(r.Peak)
	}
	if r.Why != "" {
		s += ": " + r.Why
	}
	if r.Seconds > 0 {
		s += fmt.Sprintf(" (%.1f s)", r.Seconds)
	}
	return printable.Clean(s)
}
