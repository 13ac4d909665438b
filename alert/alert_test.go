package alert

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const (
	mib = 1 << 20
	t0  = int64(1_800_000_000_000_000_000)
)

// logLines is a log a test reads.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }

func (l *logLines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitLog waits until the log has a line containing s.
func (l *logLines) wait(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(l.text(), s) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the log never said %q:\n%s", s, l.text())
}

// fixture is a store with one agent process (pid 4242) on a 16 GiB GPU, a
// watcher running cmd over it, and the file the command appends events to.
type fixture struct {
	in  *ingest.Ingest
	w   *Watcher
	log *logLines
	out string // cmd's events, one a line
	now time.Time
}

func newFixture(t *testing.T, cmd string, opt Options) *fixture {
	t.Helper()
	f := &fixture{in: ingest.New(store.New(store.DefaultOptions())), log: &logLines{}, out: filepath.Join(t.TempDir(), "events")}
	f.in.Device(store.Device{Index: 0, UUID: "GPU-alert", Name: "Test GPU", Total: 16 << 30, Source: "nvml"})
	f.hello(4242)
	opt.Command = strings.ReplaceAll(cmd, "OUT", f.out)
	opt.Log = f.log.add
	if opt.Poll == 0 {
		opt.Poll = 20 * time.Millisecond
	}
	f.w = Start(f.in.Store(), opt)
	t.Cleanup(func() { f.w.Stop() })
	return f
}

func (f *fixture) hello(pid int) {
	f.in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"}, T: t0,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-alert", Name: "Test GPU", Total: 16 << 30}}})
}

func (f *fixture) oom(pid int, t int64) {
	f.in.Apply(pid, wire.OOM{Type: wire.TypeOOM, T: t, Dev: 0, Requested: 2 << 30, Free: 1 << 30, Limit: 16 << 30,
		Allocated: 14 << 30, Reserved: 15 << 30, Peak: 15 << 30})
}

// events reads the events the command wrote, waiting until there are n.
func (f *fixture) events(t *testing.T, n int) []Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var evs []Event
		if fh, err := os.Open(f.out); err == nil {
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				var e Event
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("not an event: %q: %v", sc.Text(), err)
				}
				evs = append(evs, e)
			}
			fh.Close()
		}
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An OOM runs the command once with the event on its standard input and
// in its environment; a second OOM of the process within the window is
// dropped, counted and logged, and the next run says how many were.
func TestOOMRunsTheCommandOnceAWindow(t *testing.T) {
	now := time.Unix(0, t0)
	var mu sync.Mutex
	f := newFixture(t, `cat >> OUT; echo "$GPUTOP_EVENT $GPUTOP_PID $GPUTOP_PROCESS $GPUTOP_DEVICE $GPUTOP_MESSAGE" >> OUT.env`,
		Options{Every: time.Minute, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	f.oom(4242, t0+1)
	evs := f.events(t, 1)
	f.log.wait(t, "alert oom (pid 4242 on GPU 0): ran the alert command")
	f.oom(4242, t0+2)
	f.log.wait(t, "alert oom (pid 4242 on GPU 0): not run, one ran 0s ago (at most one per event kind and process every 1m0s)")
	if len(evs) != 1 || evs[0].Event != KindOOM || evs[0].PID != 4242 || evs[0].OOM == nil || evs[0].OOM.Requested != 2<<30 ||
		evs[0].GPU != "Test GPU" || evs[0].T != t0+1 {
		t.Fatalf("events: %+v", evs)
	}
	want := "pid 4242 on GPU 0: CUDA out of memory, asking for 2.00 GiB with 14.00 GiB allocated and 15.00 GiB reserved by torch (its limit 16.00 GiB)"
	if evs[0].Message != want {
		t.Errorf("message %q\nwant    %q", evs[0].Message, want)
	}
	env, _ := os.ReadFile(f.out + ".env")
	if got := strings.TrimSpace(string(env)); got != "oom 4242 4242 0 "+want {
		t.Errorf("environment: %q", got)
	}
	// the window passes: the next OOM runs, saying one was dropped
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	f.oom(4242, t0+3)
	f.log.wait(t, "alert oom (pid 4242 on GPU 0) [1 more of these dropped since the last run]: ran the alert command")
	if st := f.w.Stop(); st.Ran != 2 || st.Dropped != 1 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	if evs := f.events(t, 2); len(evs) != 2 {
		t.Errorf("%d events, want 2", len(evs))
	}
}

// An end row whose verdict is ✗ runs the command; one still waiting for
// its holders walk runs it once the walk says ✗; a ✓ does not.
func TestVerdictRunsTheCommand(t *testing.T) {
	f := newFixture(t, `cat >> OUT`, Options{})
	yes := true
	held := &wire.Held{T: t0 + 1, Allocated: 1 << 30, Python: 1 << 30,
		Top: []wire.HolderGroup{{Kind: "variable", Name: "losses", Bytes: 1 << 30, Tensors: 10}}}
	f.in.Apply(4242, wire.Mark{Type: wire.TypeMark, T: t0 + 1, Label: "After cleanup", End: &yes,
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 30, Held: held}}})
	f.in.Apply(4242, wire.Mark{Type: wire.TypeMark, T: t0 + 2, Label: "Released", End: &yes,
		Devs: []wire.DevStats{{Dev: 0, Allocated: 0, Held: &wire.Held{T: t0 + 2}}}})
	// a row from a key, awaiting its walk, then given a ✗ one
	f.hello(4343)
	f.in.Apply(4343, wire.Sample{Type: wire.TypeSample, T: t0 + 3, Dev: 0, Allocated: 1 << 30})
	f.in.Store().TakeSnapshot("After cleanup", 0, t0+4, "key", nil, true)
	time.Sleep(100 * time.Millisecond) // the watcher sees it waiting
	f.in.Apply(4343, wire.Holders{Type: wire.TypeHolders, T: t0 + 5, Dev: 0, Groups: held.Top,
		Held: &wire.Held{T: t0 + 5, Allocated: 1 << 30, Python: 1 << 30, Top: held.Top}})
	evs := f.events(t, 2)
	time.Sleep(100 * time.Millisecond)
	if evs = f.events(t, 2); len(evs) != 2 {
		t.Fatalf("%d events, want 2: %+v", len(evs), evs)
	}
	for i, pid := range []int{4242, 4343} {
		e := evs[i]
		if e.Event != KindVerdict || e.PID != pid || e.Verdict == nil || e.Verdict.Mark != "✗" || e.Verdict.Label != "After cleanup" ||
			!strings.Contains(e.Message, "losses") {
			t.Errorf("event %d: %+v", i, e)
		}
	}
}

// steps sends process pid n "Step N" rows, its allocated growing by leak a
// step from 2 GiB with a 1 GiB transient.
func (f *fixture) steps(pid, from, n int, leak uint64) {
	for i := from; i < from+n; i++ {
		b := uint64(2<<30) + uint64(i-1)*leak
		t := t0 + int64(i)*int64(time.Second)
		f.in.Apply(pid, wire.Sample{Type: wire.TypeSample, T: t - int64(time.Second)/2, Dev: 0, Allocated: b + 1<<30, Reserved: b + 1<<30, Peak: b + 1<<30})
		f.in.Apply(pid, wire.Mark{Type: wire.TypeMark, T: t, Label: fmt.Sprintf("Step %d", i),
			Devs: []wire.DevStats{{Dev: 0, Allocated: b + leak, Reserved: b + 1<<30, Peak: b + 1<<30}}})
	}
}

// A forecast that falls under --alert-steps runs the command once, while
// it stays under; a stable process never does.
func TestForecastUnderTheThreshold(t *testing.T) {
	f := newFixture(t, `cat >> OUT`, Options{Steps: 100, Within: -1, Now: func() time.Time { return time.Unix(0, t0+int64(200*time.Second)) }})
	f.hello(4343)
	f.steps(4343, 1, 60, 0) // stable
	// 120 MiB a step: at step 6 the peak is 3 GiB + 5·120 MiB, 16 GiB is
	// 106 steps away; 20 steps later, 86
	f.steps(4242, 1, 6, 120*mib)
	time.Sleep(200 * time.Millisecond)
	if evs := f.events(t, 0); len(evs) != 0 {
		t.Fatalf("a forecast over the threshold fired: %+v", evs)
	}
	f.steps(4242, 7, 20, 120*mib)
	evs := f.events(t, 1)
	time.Sleep(200 * time.Millisecond)
	if evs = f.events(t, 1); len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Event != KindForecast || e.PID != 4242 || e.Forecast == nil || e.Forecast.Unit != "steps" || e.Forecast.In > 100 ||
		e.Forecast.Low > e.Forecast.In || e.Forecast.High < e.Forecast.In || e.Forecast.GrowthBytes != 120*mib ||
		!strings.HasPrefix(e.Message, "pid 4242 on GPU 0: OOM in about ") {
		t.Errorf("event %+v %+v", e, e.Forecast)
	}
	if st := f.w.Stats(); st.Ran != 1 || st.Dropped != 0 {
		t.Errorf("stats %+v: the forecast fired again while under", st)
	}
}

// A command past its timeout is killed with what it started; a failing
// one is logged with its exit status and its standard error's last line.
func TestHangingAndFailingCommands(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	f := newFixture(t, `sleep 300 & echo $! > `+pidFile+`; wait`, Options{Timeout: 300 * time.Millisecond})
	f.oom(4242, t0+1)
	f.log.wait(t, "alert oom (pid 4242 on GPU 0): the alert command was still running after 300ms: killed (SIGKILL to its process group)")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(child, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d is still running", child)
		}
		time.Sleep(10 * time.Millisecond)
	}

	g := newFixture(t, `echo first >&2; echo "no route to host" >&2; exit 3`, Options{})
	g.oom(4242, t0+1)
	g.log.wait(t, "alert oom (pid 4242 on GPU 0): the alert command failed (exit status 3): no route to host")
	if st := g.w.Stop(); st.Failed != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Past MaxRunning commands at once, events are dropped and logged; the
// watcher never waits for a command.
func TestAtMostMaxRunningAtOnce(t *testing.T) {
	f := newFixture(t, `sleep 300`, Options{Timeout: time.Hour})
	for pid := 5001; pid <= 5000+MaxRunning+1; pid++ {
		f.hello(pid)
		f.oom(pid, t0+int64(pid))
	}
	f.log.wait(t, fmt.Sprintf("not run, %d alert commands are still running (at most %d at once)", MaxRunning, MaxRunning))
	if st := f.w.Stats(); st.Ran != MaxRunning || st.Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
	start := time.Now()
	st := f.w.Stop()
	if took := time.Since(start); took > StopWait+3*time.Second {
		t.Errorf("Stop took %s", took)
	}
	if st.Failed != MaxRunning {
		t.Errorf("stats %+v: the commands still running at the end are killed and counted", st)
	}
	f.log.wait(t, "the alert command was still running as gputop ended: killed")
}

// A process whose forecast predicts an OOM has its agent asked for a
// holders walk, once every AskEvery while it does, so that the cause can
// name the holder; with no command, nothing runs.
func TestForecastOfAnOOMAsksForAWalk(t *testing.T) {
	var mu sync.Mutex
	var asked [][2]int
	now := time.Unix(0, t0+int64(200*time.Second))
	f := newFixture(t, "", Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Ask: func(pid, dev int) error { mu.Lock(); asked = append(asked, [2]int{pid, dev}); mu.Unlock(); return nil }})
	calls := func() int { mu.Lock(); defer mu.Unlock(); return len(asked) }
	f.hello(4343)
	f.steps(4343, 1, 30, 0) // stable: never asked
	f.steps(4242, 1, 30, 120*mib)
	f.log.wait(t, "pid 4242 on GPU 0: its forecast says OOM; asked its agent for a holders walk, to name what holds the growing memory")
	time.Sleep(200 * time.Millisecond)
	if n := calls(); n != 1 || asked[0] != [2]int{4242, 0} {
		t.Fatalf("asked %v, want pid 4242's torch device 0 once", asked)
	}
	// the answer names the holder in the forecast's cause
	groups := []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: 2 << 30}, {Kind: "variable", Name: "losses", Bytes: 3 << 30}}
	f.in.Apply(4242, wire.Holders{Type: wire.TypeHolders, T: t0 + int64(31*time.Second), Dev: 0, Groups: groups})
	fs := forecast.All(f.in.Store(), now.UnixNano(), true)
	if len(fs) != 2 || !strings.Contains(fs[0].CauseText(), "`losses`") {
		t.Errorf("forecasts %+v", fs)
	}
	// AskEvery later, while it still predicts an OOM: asked again
	mu.Lock()
	now = now.Add(AskEvery)
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for calls() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := calls(); n != 2 {
		t.Errorf("asked %d times, want 2", n)
	}
	if st := f.w.Stats(); st.Ran != 0 {
		t.Errorf("stats %+v: no command to run", st)
	}
}

// More rows between two looks than one look reads: the newest are looked
// at, and the log says how many were not.
func TestRowsPastALookAreCounted(t *testing.T) {
	f := newFixture(t, `cat >> OUT`, Options{Poll: time.Hour})
	for i := range maxNewRows + 10 {
		f.in.Apply(4242, wire.Mark{Type: wire.TypeMark, T: t0 + int64(i), Label: "row", Devs: []wire.DevStats{{Dev: 0, Allocated: 1}}})
	}
	f.oom(4242, t0+int64(maxNewRows+10))
	f.w.Stop() // its last look
	if !strings.Contains(f.log.text(), fmt.Sprintf("alert: %d rows came between two looks; the oldest 11 were not looked at (at most %d a look)", maxNewRows+11, maxNewRows)) {
		t.Errorf("log:\n%s", f.log.text())
	}
	if evs := f.events(t, 1); len(evs) != 1 || evs[0].Event != KindOOM {
		t.Errorf("the newest row, an OOM, should have run the command: %+v", evs)
	}
}
