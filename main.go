// Command gputop is a terminal GPU-memory profiler for PyTorch: NVML sampled
// at 1 kHz from outside, the caching allocator's own counters streamed from
// inside the training process, labelled snapshots, CSV, record and replay.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/agentlink"
	"github.com/gputop/gputop/demo"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/ui"
	"github.com/gputop/gputop/wire"
)

const version = "0.1.0"

const usage = `gputop: GPU memory profiler for PyTorch (NVML + in-process allocator agent)

Usage:
  gputop [flags]                  live TUI over local GPUs (NVML) and attached agents
  gputop --demo                   TUI over a real H200 recording embedded in the binary
  gputop --replay FILE            TUI over a recording
  gputop record -o FILE [flags]   headless recording until Ctrl-C or --duration;
                                  an existing FILE with data only with --force
  gputop export FILE --csv OUT    summary CSV of a recording (OUT - is standard output)
  gputop snap LABEL               add a labelled snapshot to the running gputop
  gputop version

Flags:
`

func main() {
	// GPUTOP_CPUPROFILE=FILE writes a CPU profile of the whole run and
	// GPUTOP_MEMPROFILE=FILE a heap profile (allocations over the run) at
	// its end, for bench/; %p in FILE becomes the process id.
	profile := func(env string) *os.File {
		path := os.Getenv(env)
		if path == "" {
			return nil
		}
		f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
		if err != nil {
			fmt.Fprintf(os.Stderr, "gputop: %s: %v\n", env, err)
			return nil
		}
		return f
	}
	cpu, mem := profile("GPUTOP_CPUPROFILE"), profile("GPUTOP_MEMPROFILE")
	if cpu != nil && pprof.StartCPUProfile(cpu) != nil {
		cpu.Close()
		cpu = nil
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	if cpu != nil {
		pprof.StopCPUProfile()
		cpu.Close()
	}
	if mem != nil {
		pprof.Lookup("allocs").WriteTo(mem, 0)
		mem.Close()
	}
	os.Exit(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "record":
			return cmdRecord(args[1:], stderr)
		case "export":
			return cmdExport(args[1:], stdout, stderr)
		case "snap":
			return cmdSnap(args[1:], stdout, stderr)
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, "gputop", version)
			return 0
		}
	}
	return cmdTUI(args, stderr)
}

// sourceFlags are shared by the TUI and record.
type sourceFlags struct {
	rate, procRate float64
	source, socket string
}

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "rate", 1000, "NVML device samples per second per GPU")
	fs.Float64Var(&s.procRate, "proc-rate", 10, "NVML process-list refreshes per second")
	fs.StringVar(&s.source, "source", "all", "sources: nvml, agent or all")
	fs.StringVar(&s.socket, "socket", "", "agent socket path (default $GPUTOP_SOCKET, else $XDG_RUNTIME_DIR/gputop/gputop.sock, else /tmp/gputop-$UID/gputop.sock)")
}

func (s *sourceFlags) validate() error {
	switch s.source {
	case "nvml", "agent", "all":
	default:
		return fmt.Errorf("--source %q: want nvml, agent or all", s.source)
	}
	if s.rate <= 0 || s.rate > 10000 {
		return fmt.Errorf("--rate %g: want 0 < rate <= 10000", s.rate)
	}
	if s.procRate <= 0 || s.procRate > 1000 {
		return fmt.Errorf("--proc-rate %g: want 0 < rate <= 1000", s.procRate)
	}
	return nil
}

// start starts what the flags ask for. It returns the agent server (nil
// without agents) and a stop function that, once ctx is done, waits for the
// sources to end. Nothing runs unless every source could be set up.
func (s *sourceFlags) start(ctx context.Context, st *store.Store) (*agentlink.Server, func(), error) {
	liveRuntime()
	var n *sampler.NVML
	if s.source == "nvml" || s.source == "all" {
		n = sampler.NewNVML(nvml.New(), st, sampler.NVMLOptions{Rate: s.rate, ProcRate: s.procRate, Thread: true})
		if err := n.Init(); err != nil {
			if errors.Is(err, sampler.ErrNoDriver) && s.source == "all" {
				return nil, nil, fmt.Errorf("%w\n(to watch only PyTorch agents on a machine without a driver: --source agent)", err)
			}
			return nil, nil, err
		}
	}
	var srv *agentlink.Server
	if s.source == "agent" || s.source == "all" {
		path := s.socket
		var err error
		if path == "" {
			path, err = agentlink.DefaultSocketPath()
		}
		if err == nil {
			srv, err = agentlink.Listen(path, st, agentlink.Options{Log: st.Log})
		}
		if err != nil {
			if n != nil {
				n.Close()
			}
			return nil, nil, err
		}
	}
	var wg sync.WaitGroup
	if n != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx); err != nil {
				st.Log("NVML sampling stopped: " + err.Error())
			}
			n.Close()
		}()
	}
	if srv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ctx); err != nil {
				st.Log("agent socket: " + err.Error())
			}
		}()
	}
	return srv, wg.Wait, nil
}

// liveRuntime suits the Go runtime to a monitor that runs for hours beside
// training. Device memory is sampled by a native thread (sampler/native),
// so the Go side only drains it, draws and serves agents: one P is enough,
// and with no idle Ps to wake, each timer and channel wake-up costs about
// half as much (H200: a Go loop waking 1000 times a second took 1.6% of a
// core on one P, 2.9% on two). A heap goal of 1.25x the live heap instead
// of 2x keeps RSS down; the garbage is well under 1 MB/s, so the extra
// collections cost little. GOMAXPROCS and GOGC in the environment win.
func liveRuntime() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
}

func newFlagSet(name string, stderr io.Writer, extra string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		if extra != "" {
			fmt.Fprint(stderr, extra)
		}
		fs.PrintDefaults()
	}
	return fs
}

// parse returns -1 to continue, or an exit code (0 for -h, 2 for bad flags).
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return -1
}

func cmdTUI(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop", stderr, "")
	var sf sourceFlags
	sf.register(fs)
	demoFlag := fs.Bool("demo", false, "play the recording embedded in the binary")
	replay := fs.String("replay", "", "play a recording file")
	csvPath := fs.String("csv", "", "where `e` and quitting write the summary CSV (default ./gputop-summary-YYYYmmdd-HHMMSS.csv on `e`, nothing on quit); a file (replaced atomically), FIFO or device, not - (the TUI draws on standard output)")
	fps := fs.Int("fps", 30, "screen redraws per second at most")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if err := sf.validate(); err != nil {
		fmt.Fprintln(stderr, "gputop:", err)
		return 2
	}
	if *fps < 1 || *fps > 120 {
		fmt.Fprintf(stderr, "gputop: --fps %d: want 1..120\n", *fps)
		return 2
	}
	if *csvPath != "" {
		if t, err := outfile.Resolve(*csvPath); err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
			fmt.Fprintf(stderr, "gputop: --csv %s: the TUI draws on standard output, so the CSV cannot go there; give a file name (or write a recording's CSV to standard output with `gputop export FILE --csv -`)\n", *csvPath)
			return 2
		}
	}
	opt := ui.Options{CSVPath: *csvPath, FPS: *fps, Now: time.Now}
	var st *store.Store
	// a closed terminal (SIGHUP) or kill (SIGTERM) ends the TUI like q does,
	// so --csv is still written
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	stop := func() {}
	var load *replayLoad // --replay: the file loads while the TUI shows how far it got
	switch {
	case *demoFlag:
		st = store.New(replayOptions())
		info, err := recording.LoadReader("demo", bytes.NewReader(demo.Recording), st)
		if info.Dropped.Any() {
			st.Log(droppedNote(info.Dropped))
		}
		if err != nil {
			opt.LoadErr = err.Error()
		}
		opt.Title = "demo: " + demo.Title
		opt.Replay = true
	case *replay != "":
		st = store.New(replayOptions())
		var err error
		if load, err = startReplay(ctx, *replay, st); err != nil {
			if ctx.Err() != nil {
				return 0 // closed or killed before anything loaded
			}
			say(stderr, "gputop:", err)
			return 1
		}
		opt.Title = *replay
		opt.Replay = true
	default:
		st = store.New(store.DefaultOptions())
		srv, s, err := sf.start(ctx, st)
		if err != nil {
			say(stderr, "gputop:", err)
			return 1
		}
		stop = s
		if srv != nil {
			opt.RequestHolders = srv.RequestHolders
			st.Log("agents: listening on " + srv.Path())
		}
	}
	opt.WriteCSV = func(path string) error { return snapshot.WriteCSV(path, st.Snapshots(), st.Devices(), st.OOM) }
	var model tea.Model = ui.New(st, opt)
	if load != nil {
		model = ui.NewLoading(st, opt, load.ui())
	}
	_, err := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(*fps)).Run()
	signalled := ctx.Err() != nil
	cancel() // stops a load still running
	stop()
	// a load given up leaves nothing to write: the CSV would lack rows
	if signalled && *csvPath != "" && (load == nil || load.complete()) {
		if werr := opt.WriteCSV(*csvPath); werr != nil {
			say(stderr, "gputop:", werr)
			return 1
		}
		return 0
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "gputop:", err)
		return 1
	}
	return 0
}

// replayOptions keep a whole recording at full resolution up to ~33 min at
// 1 kHz; older parts of longer recordings come from the min/max tiers.
func replayOptions() store.Options {
	o := store.DefaultOptions()
	o.RawCapacity = 2_000_000
	o.KeepGone = 0 // a recording is shown whole
	return o
}

func cmdRecord(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop record", stderr, "\ngputop record -o FILE [flags]\n")
	var sf sourceFlags
	sf.register(fs)
	out := fs.String("o", "", "recording file to write (required)")
	duration := fs.Duration("duration", 0, "stop after this long (default: until Ctrl-C)")
	comment := fs.String("comment", "", "free text stored in the recording's header")
	force := fs.Bool("force", false, "replace FILE if it already holds data (without it an existing file is never truncated)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "gputop record: -o FILE is required and takes no other arguments")
		fs.Usage()
		return 2
	}
	if err := sf.validate(); err != nil {
		fmt.Fprintln(stderr, "gputop record:", err)
		return 2
	}
	// the output is looked at now and opened only once the sources have
	// started: a recorder that cannot start touches nothing
	if _, err := outfile.CheckStream(*out, *force); err != nil {
		say(stderr, "gputop record:", forceHint(err))
		return 1
	}
	host, _ := os.Hostname()
	w := recording.NewWriter(wire.Recording{
		Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Host: host,
		Tool: "gputop " + version, RateHz: int(sf.rate), Comment: *comment,
	})
	st := store.New(store.DefaultOptions())
	st.SetTap(w)
	var events eventPrinter
	st.OnLog(events.add)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, *duration)
		defer c()
	}
	srv, stop, err := sf.start(ctx, st)
	if err != nil {
		w.Close()
		say(stderr, "gputop record:", err)
		return 1
	}
	f, err := outfile.OpenStream(ctx, *out, *force, func() {
		say(stderr, fmt.Sprintf("gputop record: %s is a FIFO: waiting for a reader", *out))
	})
	if err == nil {
		err = w.Start(f, *out)
	}
	if err != nil {
		cancel()
		stop()
		w.Close()
		events.flush(stderr, "gputop record: ")
		say(stderr, "gputop record:", forceHint(err))
		return 1
	}
	where := ""
	if srv != nil {
		where = ", agents on " + srv.Path()
	}
	say(stderr, fmt.Sprintf("gputop record: writing %s (source %s%s); Ctrl-C ends it", *out, sf.source, where))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var told recording.Drops // drops printed so far
	var toldAt time.Time
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			// agent events (attached, closed with a reason) go to stderr
			events.flush(stderr, "gputop record: ")
			if d := w.Stats().Drops(); d != told && time.Since(toldAt) >= time.Second {
				say(stderr, fmt.Sprintf("gputop record: %s is not keeping up: dropped so far %s", *out, d))
				told, toldAt = d, time.Now()
			}
			if err := w.Err(); err != nil {
				say(stderr, "gputop record:", err)
				break loop
			}
		}
	}
	cancel()
	stop()
	err = w.Close()
	events.flush(stderr, "gputop record: ")
	s := w.Stats()
	say(stderr, fmt.Sprintf("gputop record: %s: %d snapshots, %d bytes", *out, len(st.Snapshots()), s.Bytes))
	code := 0
	if err != nil {
		say(stderr, "gputop record:", err)
		code = 1
	}
	if d := s.Drops(); d.Any() {
		say(stderr, fmt.Sprintf("gputop record: %s: not everything was written: dropped %s (the file says so, and loads)", *out, d))
		code = 1
	}
	return code
}

// forceHint adds how to replace a file that record refused to truncate.
func forceHint(err error) string {
	var he *outfile.HoldsDataError
	if errors.As(err, &he) {
		return err.Error() + "; --force replaces it"
	}
	return err.Error()
}

// droppedNote says what a recording lacks because its recorder fell behind.
func droppedNote(d recording.Drops) string {
	return fmt.Sprintf("the recorder dropped %s (its output did not keep up): the data has gaps there", d)
}

func cmdExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop export", stderr, "\ngputop export FILE --csv OUT\n")
	out := fs.String("csv", "", "summary CSV to write (required)")
	// accept the file before or after the flags
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop export: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if file == "" || *out == "" {
		fmt.Fprintln(stderr, "gputop export: want FILE and --csv OUT")
		fs.Usage()
		return 2
	}
	// with the CSV on standard output, the report goes to stderr
	report := stdout
	if t, err := outfile.Resolve(*out); err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
		report = stderr
	}
	st := store.New(store.DefaultOptions())
	info, err := recording.Load(file, st)
	code := 0
	if err != nil {
		var fe *recording.FormatError
		switch {
		case !errors.As(err, &fe) || info.Frames == 0:
			// nothing to export: no CSV is written, none replaced
			say(stderr, "gputop export:", err)
			return 1
		case fe.Truncated:
			// a recorder that was killed: everything before its cut-off
			// last line is there, so this alone is not a failure
			say(stderr, "gputop export: warning:", err)
		default:
			// what was readable is still exported, but not all of it was
			say(stderr, "gputop export:", err)
			code = 1
		}
	}
	if err := snapshot.WriteCSV(*out, st.Snapshots(), st.Devices(), st.OOM); err != nil {
		say(stderr, "gputop export:", err)
		return 1
	}
	say(report, fmt.Sprintf("wrote %s (%d rows)", *out, len(st.Snapshots())))
	if info.Dropped.Any() {
		say(report, fmt.Sprintf("%s: %s", file, droppedNote(info.Dropped)))
	}
	for _, l := range snapshot.Findings(st.Snapshots(), st.Devices(), st.OOM) {
		say(report, l)
	}
	return code
}

func cmdSnap(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop snap", stderr, "\ngputop snap LABEL [--end[=false]] [--socket PATH]\n")
	sock := fs.String("socket", "", "socket of the running gputop")
	endFlag := fs.Bool("end", false, "the rows end a run and get a verdict (--end=false: they do not); without it the label decides (\"After cleanup\", \"Training end\" do)")
	var label string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		label, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if label == "" && fs.NArg() == 1 {
		label = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop snap: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if label == "" {
		fmt.Fprintln(stderr, "gputop snap: want a LABEL")
		return 2
	}
	path := *sock
	if path == "" {
		p, err := agentlink.DefaultSocketPath()
		if err != nil {
			say(stderr, "gputop snap:", err)
			return 1
		}
		path = p
	}
	var end *bool
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "end" {
			end = endFlag
		}
	})
	if err := agentlink.Snap(path, label, end, 3*time.Second); err != nil {
		say(stderr, "gputop snap:", err)
		return 1
	}
	fmt.Fprintf(stdout, "snapshot %q added\n", label)
	return 0
}

// say prints a message as fmt.Fprintln does, each of its lines made
// printable: messages quote file names, socket paths and what recordings
// and peers said.
func say(w io.Writer, a ...any) {
	lines := strings.Split(strings.TrimSuffix(fmt.Sprintln(a...), "\n"), "\n")
	for i, l := range lines {
		lines[i] = printable.Clean(l)
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}
