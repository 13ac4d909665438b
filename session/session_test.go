package session

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// A session of the agent socket with a recording and metrics: an agent
// reaches the store, an end row asks it for a holders walk over the
// socket (the ingest's asker is the socket's), and Stop leaves a recording
// that loads with what happened, no socket file and no bound port.
func TestAgentSessionRecordsAndAsks(t *testing.T) {
	opt := agentOptions(t)
	rec := filepath.Join(t.TempDir(), "run.gputop")
	opt.Record = &Record{Path: rec, Writer: " (unit)", Comment: "a test"}
	s, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if s.Agents() == nil || s.Agents().Path() != opt.Socket || !exists(opt.Socket) || !exists(rec) {
		t.Fatalf("started without its socket or its recording: agents %v", s.Agents())
	}
	addr := s.MetricsAddr()
	if code, err := scrape(addr); err != nil || code != http.StatusOK {
		t.Fatalf("metrics at %q: %d %v", addr, code, err)
	}
	at := time.Now().UnixNano()
	a := attach(t, s, opt.Socket, 300<<20, at)

	rows := s.Ingest().TakeSnapshot("After cleanup", s.Store().Agents()[0].DevMap[0], at+int64(time.Millisecond), "key", nil)
	if len(rows) != 1 || !rows[0].End || !rows[0].Awaiting {
		t.Fatalf("end row %+v, want one waiting for its agent's walk", rows)
	}
	if req := a.request(t); req.Type != wire.TypeRequest || req.What != wire.RequestHolders || req.Dev == nil || *req.Dev != 0 {
		t.Fatalf("the agent was asked %+v, want a holders walk of its cuda:0", req)
	}

	ended := s.Stop()
	if ended.Err != nil || ended.Drops != "" || ended.Path != rec || ended.Stats.Bytes == 0 {
		t.Fatalf("recording ended %+v", ended)
	}
	if exists(opt.Socket) {
		t.Error("the agent socket's file is left after Stop")
	}
	if _, err := scrape(addr); err == nil {
		t.Error("the metrics port still answers after Stop")
	}
	if again := s.Stop(); again.Path != ended.Path || again.Err != ended.Err {
		t.Errorf("a second Stop says %+v, the first %+v", again, ended)
	}

	st := store.New(store.DefaultOptions())
	info, err := recording.Load(rec, st)
	if err != nil {
		t.Fatal(err)
	}
	if info.Header.Tool != "gputop test (unit)" || info.Header.Comment != "a test" || info.Header.RateHz != 1000 {
		t.Errorf("header %+v", info.Header)
	}
	if ag := st.Agents(); len(ag) != 1 || ag[0].Hello.PID != os.Getpid() {
		t.Errorf("agents in the recording: %+v", ag)
	}
	if snaps := st.Rows(); len(snaps) != 1 || snaps[0].Label != "After cleanup" || *snaps[0].Allocated != 300<<20 {
		t.Errorf("rows in the recording: %+v", snaps)
	}
}

// Stop's order, seen from outside: the sources end first (the socket file
// goes), then the recording gets its bounded wait for an output that has
// stopped taking lines while the metrics endpoint still answers, then the
// endpoint closes; the recording says what it lost.
func TestStopOrder(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	opt := agentOptions(t)
	opt.Record = &Record{Out: pw}
	s, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.MetricsAddr()
	// the reader stops reading: the pipe is filled up to its capacity
	pr.Read(make([]byte, 1<<10)) // the header, at least
	pw.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	pw.Write(make([]byte, 4<<20))
	pw.SetWriteDeadline(time.Time{})
	attach(t, s, opt.Socket, 1<<20, time.Now().UnixNano())

	type seen struct {
		socketGone, scraped bool
	}
	during := make(chan seen, 1)
	stopped := make(chan struct{})
	go func() {
		// while Stop waits on the recording: the socket is gone and the
		// endpoint answers
		var sn seen
		for {
			select {
			case <-stopped:
				during <- sn
				return
			default:
			}
			if !exists(opt.Socket) {
				sn.socketGone = true
				if code, err := scrape(addr); err == nil && code == http.StatusOK {
					sn.scraped = true
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	ended := s.Stop()
	close(stopped)
	sn := <-during
	if !sn.socketGone || !sn.scraped {
		t.Errorf("during Stop: socket gone %v, metrics answered after that %v; want the sources stopped first and metrics last", sn.socketGone, sn.scraped)
	}
	if !errors.Is(ended.Err, recording.ErrStalled) || ended.Drops == "" || ended.Path != "standard output" {
		t.Errorf("recording ended %+v, want it stalled, its drops said", ended)
	}
	if _, err := scrape(addr); err == nil {
		t.Error("the metrics port still answers after Stop")
	}
}

// A part that cannot start stops Start with its error and leaves nothing
// of the others behind: no socket file, no recording, no bound port (the
// next session binds the same address).
func TestStartFailureLeavesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// a port free now, which each failing session binds and must give back
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	held := agentOptions(t) // a session on a socket, for a second to find busy
	first, err := Start(context.Background(), held)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()

	noDriver := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	for _, c := range []struct {
		name  string
		edit  func(*Options)
		want  string
		check func(error) bool
	}{
		{"metrics port in use", func(o *Options) { o.Metrics = busy.Addr().String() }, "bind: address already in use", nil},
		{"no NVIDIA driver", func(o *Options) { o.NVML, o.Lib = true, noDriver }, "",
			func(err error) bool { return errors.Is(err, sampler.ErrNoDriver) }},
		{"socket in use", func(o *Options) { o.Socket = held.Socket }, "another gputop is listening", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt := agentOptions(t)
			opt.Metrics = freeAddr
			rec := filepath.Join(t.TempDir(), "run.gputop")
			opt.Record = &Record{Path: rec}
			c.edit(&opt)
			s, err := Start(context.Background(), opt)
			if s != nil || err == nil || !strings.Contains(err.Error(), c.want) || (c.check != nil && !c.check(err)) {
				t.Fatalf("Start: %v, %v; want an error saying %q", s, err, c.want)
			}
			var oe *OutputError
			if errors.As(err, &oe) {
				t.Errorf("%v is not the recording's fault", err)
			}
			if opt.Socket != held.Socket && exists(opt.Socket) {
				t.Error("the agent socket was created")
			}
			if exists(rec) {
				t.Error("the recording was created")
			}
			if opt.Metrics == freeAddr {
				ln, err := net.Listen("tcp", freeAddr)
				if err != nil {
					t.Fatalf("the metrics port is still bound: %v", err)
				}
				ln.Close()
			}
		})
	}
	if !exists(held.Socket) {
		t.Error("the first session's socket went with a second session that could not start")
	}
}

// A recording's output that cannot be had is an *OutputError, whether it
// is refused before anything starts (a file that holds data, left as it
// is) or fails once the sources have started (a FIFO nobody reads, given
// up on): either way nothing is left running or bound.
func TestOutputFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.gputop")
	if err := os.WriteFile(kept, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "out.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		rec     func(cancel context.CancelFunc) *Record
		matches func(error) bool
	}{
		{"holds data", func(context.CancelFunc) *Record { return &Record{Path: kept} },
			func(err error) bool { var he *outfile.HoldsDataError; return errors.As(err, &he) }},
		{"FIFO without a reader", func(cancel context.CancelFunc) *Record { return &Record{Path: fifo, Waiting: cancel} },
			func(err error) bool { return errors.Is(err, outfile.ErrNoReader) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opt := agentOptions(t)
			opt.Record = c.rec(cancel)
			s, err := Start(ctx, opt)
			var oe *OutputError
			if s != nil || !errors.As(err, &oe) || !c.matches(err) {
				t.Fatalf("Start: %v, %v (%T)", s, err, err)
			}
			if exists(opt.Socket) {
				t.Error("the agent socket is left")
			}
		})
	}
	if b, _ := os.ReadFile(kept); string(b) != "data\n" {
		t.Errorf("the file that held data became %q", b)
	}
}

// A session of nothing is an empty store to show (gputop run when nothing
// can be monitored): it starts, and stops with no recording to speak of.
func TestEmptySession(t *testing.T) {
	s, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Agents() != nil || s.MetricsAddr() != "" || s.RecordErr() != nil || len(s.Store().Devices()) != 0 {
		t.Fatal("an empty session has parts")
	}
	if e := s.Stop(); e != (Ended{}) {
		t.Fatalf("Stop: %+v", e)
	}
}

// tapFrames is a Tap that keeps the frames' types.
type tapFrames struct {
	mu    sync.Mutex
	types []string
}

func (t *tapFrames) NVML(int, int64, uint64, uint64) {}
func (t *tapFrames) Frame(f wire.Frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.types = append(t.types, f.FrameType())
}

// Options.Tap sees what the store keeps from the first frame on, as a
// recording would (gputop fit watches its child so).
func TestTapSeesTheAgentsFrames(t *testing.T) {
	opt := agentOptions(t)
	opt.Metrics = ""
	tap := &tapFrames{}
	opt.Tap = tap
	s, err := Start(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	attach(t, s, opt.Socket, 1<<20, time.Now().UnixNano())
	seen := func() []string { tap.mu.Lock(); defer tap.mu.Unlock(); return slices.Clone(tap.types) }
	// the store has the sample before the Tap is handed it
	waitFor(t, "the Tap's third frame", func() bool { return len(seen()) >= 3 })
	if got := seen(); !slices.Equal(got, []string{wire.TypeDevice, wire.TypeHello, wire.TypeSample}) { // the agent-only device it made first
		t.Fatalf("the Tap saw %q", got)
	}
}
