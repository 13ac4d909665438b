// gputop fit --values V1,V2,... [flags] -- CMD ARGS...: CMD once per value
// ({} in it replaced), each child with the agent attached and its
// allocator capped, stopped once its peak holds; the peak's line fitted to
// what was measured, and the largest value predicted to fit.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gputop/gputop/fit"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/runner"
	"github.com/gputop/gputop/units"
)

const fitUsage = `
Example:
  gputop fit --values 16,32,64,128 --memory 16GiB -- python train.py --batch-size {}
`

// the bounds on fit's durations: a child is watched at most a day, and
// each stop signal given at most ten minutes
const (
	maxFitSeconds  = 24 * 3600
	maxStopSeconds = 600
)

// fitFlags are gputop fit's flags.
type fitFlags struct {
	values      string
	memory      string
	margin      float64
	stableSteps int
	stableSecs  float64
	maxSecs     float64
	stopSecs    float64
	step        int
	verify      bool
	json        string
	showOutput  bool

	vals  []int
	limit uint64 // --memory, 0: the GPU's free memory
}

func (f *fitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.values, "values", "", "the `LIST` of values to run CMD with, comma-separated whole numbers (e.g. 16,32,64,128)")
	fs.StringVar(&f.memory, "memory", "", "cap each child's allocator at `SIZE` (16GiB, 512MiB, 20GB) and predict for it (default: the GPU's free memory when the child starts CUDA)")
	fs.Float64Var(&f.margin, "margin", 5, "a value fits when its predicted peak is within the limit less `PERCENT`")
	fs.IntVar(&f.stableSteps, "stable-steps", 5, "the peak is stable once it has not risen for `N` training steps (0: steps are not waited for)")
	fs.Float64Var(&f.stableSecs, "stable-seconds", 20, "... or once it has not risen for `S` seconds, whichever comes first (0: seconds are not waited for)")
	fs.Float64Var(&f.maxSecs, "max-seconds", 120, "stop a child whose peak is not stable after `S` seconds, and report it unstable")
	fs.Float64Var(&f.stopSecs, "stop-seconds", 5, "stopping a child: SIGINT, then SIGTERM, then SIGKILL, `S` seconds apart")
	fs.IntVar(&f.step, "step", 0, "predict a multiple of `N` (default: the greatest common divisor of the values)")
	fs.BoolVar(&f.verify, "verify", false, "then run the predicted value and the next one up, and say whether each fit")
	fs.StringVar(&f.json, "json", "", "also write the report as JSON to `FILE` (- for standard output, instead of the table)")
	fs.BoolVar(&f.showOutput, "show-output", false, "pass the children's output through to stderr (default: kept, the last lines shown for a child that failed)")
}

// check says what is wrong with the command line as a whole.
func (f *fitFlags) check(fs *flag.FlagSet) error {
	if err := fit.CheckCommand(fs.Args()); err != nil {
		return err
	}
	if !given(fs, "values") {
		return errors.New("--values is missing: the values to run CMD with, e.g. --values 16,32,64,128")
	}
	vals, err := fit.ParseValues(f.values)
	if err != nil {
		return err
	}
	f.vals = vals
	if f.memory != "" {
		if f.limit, err = fit.ParseBytes(f.memory); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
	}
	switch {
	case !(f.margin >= 0 && f.margin < 50):
		return fmt.Errorf("--margin %g: want a percentage from 0 to under 50", f.margin)
	case f.stableSteps < 0 || f.stableSteps > 100_000:
		return fmt.Errorf("--stable-steps %d: want 0 to 100000", f.stableSteps)
	case !(f.stableSecs >= 0 && f.stableSecs <= maxFitSeconds):
		return fmt.Errorf("--stable-seconds %g: want 0 to %d", f.stableSecs, maxFitSeconds)
	case f.stableSteps == 0 && f.stableSecs == 0:
		return errors.New("--stable-steps 0 and --stable-seconds 0: the peak could never be stable; give one")
	case !(f.maxSecs >= 1 && f.maxSecs <= maxFitSeconds):
		return fmt.Errorf("--max-seconds %g: want 1 to %d", f.maxSecs, maxFitSeconds)
	case !(f.stopSecs > 0 && f.stopSecs <= maxStopSeconds):
		return fmt.Errorf("--stop-seconds %g: want more than 0, at most %d", f.stopSecs, maxStopSeconds)
	case f.step < 0 || f.step > fit.MaxValue:
		return fmt.Errorf("--step %d: want a whole number from 1 to %d (or 0: the values' greatest common divisor)", f.step, fit.MaxValue)
	}
	if isOff(os.Getenv("GPUTOP")) {
		return fmt.Errorf("GPUTOP=%s turns the agent off, and gputop fit measures through it: unset GPUTOP", os.Getenv("GPUTOP"))
	}
	if f.json != "" {
		if _, err := outfile.Resolve(f.json); refusedLink(err) {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func cmdFit(args []string, stdout, stderr io.Writer) int {
	var f fitFlags
	fs, code := parseCommand("gputop fit", fitUsage, &f, args, stderr)
	if code >= 0 {
		return code
	}
	tmpl := fs.Args()
	rep := &fit.Report{Command: tmpl, Margin: f.margin / 100, Step: f.step}
	if rep.Step == 0 {
		rep.Step = fit.Step(f.vals)
	}
	rep.Rule.Steps, rep.Rule.Seconds, rep.Rule.MaxSeconds = f.stableSteps, f.stableSecs, f.maxSecs
	// Ctrl-C (or a batch system's SIGTERM) stops the child running, and
	// what was measured is still reported
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	started := time.Now()
	var caps []valueCaps
	oomAt := 0
	for _, v := range f.vals {
		if ctx.Err() != nil {
			break
		}
		if oomAt > 0 {
			rep.Runs = append(rep.Runs, fit.Run{Value: v, Status: fit.StatusSkipped,
				Why: fmt.Sprintf("above %d, which ran out of memory", oomAt)})
			continue
		}
		if why := failedTwice(rep.Runs); why != "" {
			rep.Runs = append(rep.Runs, fit.Run{Value: v, Status: fit.StatusSkipped, Why: why})
			continue
		}
		run, c := f.child(ctx, tmpl, v, stderr)
		rep.Runs = append(rep.Runs, run)
		caps = append(caps, valueCaps{v, c})
		if run.Status == fit.StatusOOM {
			oomAt = v
		}
	}
	f.limitOf(rep, caps)
	rep.Analyse()
	if p := rep.Prediction; f.verify && p != nil && ctx.Err() == nil {
		for _, v := range []int{p.Value, p.Value + p.Step} {
			if ctx.Err() != nil {
				break
			}
			// a value measured already is not run again
			run := *runOf(rep, v)
			if run.Status == fit.StatusFit || run.Status == fit.StatusOOM {
				run.Notes = append(run.Notes[:len(run.Notes):len(run.Notes)], "measured above: not run again")
			} else {
				run, _ = f.child(ctx, tmpl, v, stderr)
			}
			run.Predicted = rep.Model.At(v)
			rep.Verify = append(rep.Verify, run)
		}
	}
	rep.Seconds = math.Round(time.Since(started).Seconds()*10) / 10

	if f.json != outfile.Stdout {
		for _, l := range rep.Text() {
			fmt.Fprintln(stdout, l)
		}
	}
	code = 0
	if f.json != "" {
		if err := outfile.Write(f.json, rep.WriteJSON); err != nil {
			say(stderr, "gputop fit: --json:", err)
			code = 1
		} else if f.json != outfile.Stdout {
			say(stderr, "gputop fit: wrote", f.json)
		}
	}
	switch {
	case ctx.Err() != nil:
		say(stderr, "gputop fit: interrupted: the report covers the values run until then")
		return 130
	case rep.Prediction == nil, rep.VerifiedWrong():
		return 1
	}
	return code
}

// failedTwice says why the next value is not run when the last two
// failed the same way (a script that cannot start, an agent that cannot
// attach: the next would too), else "".
func failedTwice(runs []fit.Run) string {
	n := len(runs)
	if n < 2 {
		return ""
	}
	a, b := runs[n-2], runs[n-1]
	if b.Status == fit.StatusSkipped && strings.HasPrefix(b.Why, "the two values before") {
		return b.Why
	}
	if a.Status != fit.StatusFailed || b.Status != fit.StatusFailed || a.Why != b.Why || !slices.Equal(a.Notes, b.Notes) || !slices.Equal(a.Output, b.Output) {
		return ""
	}
	return fmt.Sprintf("the two values before (%d, %d) failed the same way: %s", a.Value, b.Value, b.Why)
}

// valueCaps are the memory caps one value's child set.
type valueCaps struct {
	value int
	caps  []runner.Cap
}

// limitOf sets the report's limit: --memory, or the least free memory a
// child's GPU had at its CUDA initialisation; each child's own cap goes to
// its run, and notes say where a cap was not set or the GPU had less free.
func (f *fitFlags) limitOf(rep *fit.Report, caps []valueCaps) {
	rep.Limit, rep.LimitFrom = f.limit, "--memory"
	if f.limit == 0 {
		rep.LimitFrom = "the GPU's free memory when the child started CUDA; --memory sets one"
	}
	for _, vc := range caps {
		run := runOf(rep, vc.value)
		for _, c := range vc.caps {
			if c.Error != "" {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d: the memory cap was not set on device %d: %s", vc.value, c.Dev, c.Error))
				continue
			}
			run.Limit = max(run.Limit, c.Cap)
			if f.limit == 0 {
				if rep.Limit == 0 || c.Cap < rep.Limit {
					rep.Limit = c.Cap
				}
			} else if c.Free < f.limit && c.Free < rep.Limit {
				rep.Limit, rep.LimitFrom = c.Free, "the GPU's free memory, less than --memory"
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d: device %d had %s free when the child started CUDA, less than --memory %s: the limit is that",
					vc.value, c.Dev, units.Bytes(c.Free), units.Bytes(f.limit)))
			}
		}
		if len(vc.caps) == 0 && run.Measured() {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d: the child's agent said nothing of the memory cap (an agent older than gputop fit?): it ran uncapped", vc.value))
		}
	}
}

func runOf(rep *fit.Report, v int) *fit.Run {
	for i := range rep.Runs {
		if rep.Runs[i].Value == v {
			return &rep.Runs[i]
		}
	}
	return &fit.Run{}
}
