// Running an alert command: rate-limited per event kind and process, a
// bounded number at once, each in a goroutine of its own with a timeout
// that kills its whole process group; what it could not run, and how a
// command failed, in gputop's log.

package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stderrKeep is how much of a command's standard error is kept, its end:
// the log quotes its last line.
const stderrKeep = 4096

// limitKey is what the rate limit counts by: an event kind on one
// process's GPU.
type limitKey struct {
	kind     string
	pid, dev int
}

// runner runs alert commands.
type runner struct {
	opt Options

	mu      sync.Mutex
	last    map[limitKey]time.Time // when each key's command last ran
	skipped map[limitKey]int       // events of each key dropped since
	running int
	stats   Stats
	ctx     context.Context // cancelled: every running command is killed
	kill    context.CancelFunc
	wg      sync.WaitGroup
}

func newRunner(opt Options) *runner {
	ctx, kill := context.WithCancel(context.Background())
	return &runner{opt: opt, last: map[limitKey]time.Time{}, skipped: map[limitKey]int{}, ctx: ctx, kill: kill}
}

// fire runs the command for e unless the rate limit or the bound on
// running commands drops it; it never waits for the command.
func (r *runner) fire(e Event, pid int) {
	if r.opt.Command == "" {
		return // watching to ask for walks only
	}
	now := r.opt.Now()
	k := limitKey{e.Event, pid, e.Device}
	r.mu.Lock()
	if last, ok := r.last[k]; ok && now.Sub(last) < r.opt.Every {
		r.skipped[k]++
		r.stats.Dropped++
		first := r.skipped[k] == 1
		r.mu.Unlock()
		if first { // one line a window: an OOM in a loop would flood the log
			r.opt.Log(fmt.Sprintf("alert %s (%s): not run, one ran %s ago (at most one per event kind and process every %s); the next that runs says how many were dropped",
				e.Event, e.who(), now.Sub(last).Round(time.Second), r.opt.Every))
		}
		return
	}
	if r.running >= r.opt.MaxRunning {
		r.stats.Dropped++
		r.mu.Unlock()
		r.opt.Log(fmt.Sprintf("alert %s (%s): not run, %d alert commands are still running (at most %d at once)",
			e.Event, e.who(), r.opt.MaxRunning, r.opt.MaxRunning))
		return
	}
	dropped := r.skipped[k]
	r.last[k], r.skipped[k] = now, 0
	r.running++
	r.stats.Ran++
	r.wg.Add(1)
	r.mu.Unlock()
	go r.run(e, dropped)
}

// run runs the command for e (dropped: the events of its kind and process
// dropped since the last run) and logs how it ended.
func (r *runner) run(e Event, dropped int) {
	defer r.wg.Done()
	defer func() { r.mu.Lock(); r.running--; r.mu.Unlock() }()
	what := fmt.Sprintf("alert %s (%s)", e.Event, e.who())
	if dropped > 0 {
		what += fmt.Sprintf(" [%d more of these dropped since the last run]", dropped)
	}
	data, err := json.Marshal(e)
	if err != nil {
		r.failed(what + ": " + err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.opt.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", r.opt.Command)
	cmd.Stdin = bytes.NewReader(append(data, '\n'))
	cmd.Env = append(os.Environ(), e.env()...)
	var stderr tail
	cmd.Stderr = &stderr
	// its own process group, so that the timeout reaches what it started
	// (curl under sh); SIGKILL, as a command past its timeout is stuck
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a grandchild holding stderr open cannot hold this goroutine
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.opt.Log(what + ": ran the alert command")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.failed(fmt.Sprintf("%s: the alert command was still running after %s: killed (SIGKILL to its process group)%s",
			what, r.opt.Timeout, stderr.lastLine()))
	case r.ctx.Err() != nil:
		r.failed(what + ": the alert command was still running as gputop ended: killed (SIGKILL to its process group)" + stderr.lastLine())
	case errors.As(err, &ee):
		r.failed(fmt.Sprintf("%s: the alert command failed (%s)%s", what, ee.ProcessState, stderr.lastLine()))
	default:
		r.failed(what + ": the alert command could not run: " + err.Error())
	}
}

// failed counts and logs a command that failed.
func (r *runner) failed(line string) {
	r.mu.Lock()
	r.stats.Failed++
	r.mu.Unlock()
	r.opt.Log(line)
}

// stop waits at most wait for the running commands, then kills the rest
// and waits for them to be gone.
func (r *runner) stop(wait time.Duration) {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		r.kill()
		<-done
	}
	r.kill()
}

// tail keeps the last stderrKeep bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrKeep {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrKeep:]...)
	}
	return len(p), nil
}

// lastLine is ": " and the last line written that is not blank, or "".
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return ": " + l
	}
	return ""
}
