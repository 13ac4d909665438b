// gputop run [flags] -- CMD ARGS...: CMD with the agent injected, under the
// TUI (its output in a pane) or headless.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"golang.org/x/sys/unix"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/runner"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/session"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/ui"
)

// how long gputop waits, once CMD has ended, for its agents' last frames
// (the Process end row, the bye) before the summary
const runDrain = 3 * time.Second

// runFlags are gputop run's flags.
type runFlags struct {
	sources      sourceFlags
	noTUI, force bool
	record, csv  string
	fps, history int
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.sources.register(fs)
	fs.BoolVar(&f.noTUI, "no-tui", false, "no TUI: CMD's output passes through, the summary is printed at the end (the default when standard output is not a terminal)")
	fs.StringVar(&f.record, "record", "", "also write a recording of the run to `FILE`")
	fs.BoolVar(&f.force, "force", false, "with --record: replace a file that already holds data")
	fs.StringVar(&f.csv, "csv", "", "write the summary CSV to `PATH` when the run ends (a file, FIFO or device; not -)")
	fs.IntVar(&f.fps, "fps", defaultFPS, "redraw the screen at most `N` times a second")
	fs.IntVar(&f.history, "history", 0, "record torch's allocation history, the last `N` entries, so dumps (at an OOM, key M) say who allocated each block; 0: off")
}

// check says what is wrong with the command line as a whole.
func (f *runFlags) check(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return errors.New("want a command: gputop run [flags] -- CMD ARGS...")
	}
	if err := f.sources.validate(); err != nil {
		return err
	}
	if f.fps < 1 || f.fps > 120 {
		return fmt.Errorf("--fps %d: want 1..120", f.fps)
	}
	if f.history < 0 {
		return fmt.Errorf("--history %d: want a number of entries, 0 for off", f.history)
	}
	if f.csv != "" {
		t, err := outfile.Resolve(f.csv)
		if err == nil && t.Kind == outfile.Descriptor && (t.FD == 1 || t.FD == 2) {
			return fmt.Errorf("--csv %s: CMD's output goes there; give a file name", f.csv)
		}
		if refusedLink(err) {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	return nil
}

func cmdRun(args []string, stderr io.Writer) int {
	var f runFlags
	fs, code := parseCommand("gputop run", "", &f, args, stderr)
	if code >= 0 {
		return code
	}
	argv := fs.Args()
	if f.record != "" {
		if _, err := outfile.CheckStream(f.record, f.force); err != nil {
			say(stderr, "gputop run: --record:", forceHint(err))
			return 1
		}
	}
	path, code := lookPath(argv[0], stderr)
	if code != 0 {
		return code
	}
	name := strings.Join(argv, " ")
	headless := f.noTUI || !isTerminal(os.Stdout)

	ag := f.prepareAgent()
	if ag.inj != nil {
		defer ag.inj.Remove()
	}
	var events eventPrinter
	log := logbook.New()
	if headless {
		log.OnAdd(events.add)
	}
	ses, monitored, notes, err := f.monitor(log, name, stderr)
	if err != nil {
		say(stderr, "gputop run: --record:", forceHint(err))
		return 1
	}
	opt := ui.Options{Log: log}
	askAgents(&opt, ses)
	for _, n := range append(ag.notes, notes...) {
		if headless {
			say(stderr, "gputop run:", n)
		} else {
			log.Add(n)
		}
	}

	cmd := f.command(path, argv, ag.inj)
	var how string
	if headless {
		code, how = runHeadless(cmd, stderr, &events)
	} else {
		code, how = runTUI(cmd, name, ses.Ingest(), opt, f.csv, f.fps, stderr)
	}

	// the agents' last frames, then the summary
	if monitored {
		drainAgents(ses.Store(), runDrain)
	}
	sayRecordingEnd(stderr, ses.Stop(), "gputop run: --record:", "gputop run: --record: "+f.record+":")
	if headless {
		events.flush(stderr, "gputop run: ")
		say(stderr, fmt.Sprintf("gputop run: %s %s", name, how))
		for _, l := range agentSummary(ses.Store(), ag) {
			say(stderr, "gputop run:", l)
		}
		f.summary(ses.Store(), monitored, stderr)
	}
	return code
}

// lookPath finds CMD as a shell would; when it cannot, it says why and
// returns the shell's status: 127 not found, 126 found but not runnable.
func lookPath(name string, stderr io.Writer) (string, int) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, 0
	}
	say(stderr, fmt.Sprintf("gputop run: %s: %v", name, lookErr(err)))
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return "", 127
	}
	return "", 126
}

// agentInjection is the agent put into CMD's processes, or why it is not.
type agentInjection struct {
	inj   *runner.Injection // nil: CMD runs without the agent
	on    bool              // $GPUTOP leaves the agent on
	notes []string          // why CMD runs without it
}

// prepareAgent makes the private directory with the sitecustomize and the
// socket, and points the agent source at that socket (or the socket at
// --socket). Without the agent, --source all is NVML alone.
func (f *runFlags) prepareAgent() agentInjection {
	sf := &f.sources
	a := agentInjection{on: os.Getenv("GPUTOP") == "" || !isOff(os.Getenv("GPUTOP"))}
	switch {
	case !a.on:
		a.notes = append(a.notes, "GPUTOP="+os.Getenv("GPUTOP")+": the agent is off; CMD runs without it (NVML only)")
	case sf.source == "agent" || sf.source == "all":
		exe, _ := os.Executable()
		inj, err := runner.Prepare(runner.FindAgent(exe))
		if err != nil {
			a.notes = append(a.notes, err.Error()+"; CMD runs without the agent (NVML only)")
			break
		}
		a.inj = inj
		if sf.socket == "" {
			sf.socket = inj.Socket
		} else {
			inj.Socket = sf.socket
		}
	}
	if a.inj == nil && sf.source == "all" {
		sf.source = "nvml"
	}
	return a
}

// monitor starts the session that watches CMD: as the flags say; without
// NVML where there is no driver; else a session of nothing (CMD runs
// unmonitored, an empty store behind the TUI), monitored false. The notes
// say what was given up. Only a recording that cannot be opened is an
// error.
func (f *runFlags) monitor(log *logbook.Book, name string, stderr io.Writer) (*session.Session, bool, []string, error) {
	sf := &f.sources
	opt := sf.options(log)
	if f.record != "" {
		opt.Record = &session.Record{Path: f.record, Force: f.force, Comment: "gputop run -- " + name, Waiting: func() {
			say(stderr, fmt.Sprintf("gputop run: %s is a FIFO: waiting for a reader", f.record))
		}}
	}
	ctx := context.Background()
	var notes []string
	ses, err := sf.start(ctx, opt)
	if errors.Is(err, sampler.ErrNoDriver) && sf.source == "all" {
		notes = append(notes, firstLine(err.Error())+"; watching torch's counters only")
		sf.source, opt.NVML = "agent", false
		ses, err = sf.start(ctx, opt)
	}
	var oe *session.OutputError
	switch {
	case errors.As(err, &oe):
		return nil, false, notes, err
	case err != nil:
		notes = append(notes, "cannot monitor: "+firstLine(err.Error())+"; CMD runs unmonitored")
		ses, err = session.Start(ctx, session.Options{Log: log})
		return ses, false, notes, err
	}
	return ses, true, notes, nil
}

// command is CMD, the agent injected into its environment when there is
// one.
func (f *runFlags) command(path string, argv []string, inj *runner.Injection) *exec.Cmd {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	if inj != nil {
		cmd.Env = append(inj.Env(os.Environ()), historyEnv(f.history, f.record, os.Getenv("GPUTOP_DUMP_DIR"))...)
	}
	return cmd
}

// summary is the end of a headless run: the summary table and findings,
// and --csv when the run was monitored.
func (f *runFlags) summary(st *store.Store, monitored bool, stderr io.Writer) {
	snaps, devs := st.Rows(), st.Devices()
	if len(snaps) > 0 {
		for _, l := range summary.Table(snaps, devs) {
			say(stderr, l)
		}
		for _, l := range summary.Findings(snaps, devs) {
			say(stderr, l)
		}
		for _, l := range summary.LedgerFindings(st) {
			say(stderr, l)
		}
	}
	for _, l := range forecast.Findings(st) {
		say(stderr, l)
	}
	if f.csv == "" || !monitored {
		return
	}
	if err := summary.WriteStoreCSV(f.csv, st); err != nil {
		say(stderr, "gputop run:", err)
	} else {
		say(stderr, fmt.Sprintf("gputop run: wrote %s (%d rows)", f.csv, len(snaps)))
	}
}

// runHeadless runs cmd on gputop's own terminal and descriptors: its output
// passes through untouched. A Ctrl-C on the terminal reaches CMD from the
// terminal itself (same process group); one sent to gputop alone (a batch
// system's kill) is passed on, as are SIGTERM and SIGHUP.
func runHeadless(cmd *exec.Cmd, stderr io.Writer, events *eventPrinter) (int, string) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		say(stderr, "gputop run:", startErr(cmd, err))
		return 126, "could not start"
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			if (s == os.Interrupt || s == syscall.SIGQUIT) && terminalSentIt() {
				continue // the terminal sent it to CMD as well
			}
			cmd.Process.Signal(s)
		case <-tick.C:
			events.flush(stderr, "gputop run: ")
		case <-done:
			return runner.Ended(cmd.ProcessState)
		}
	}
}

// terminalSentIt: gputop's standard input is a terminal whose foreground
// process group is gputop's, so a Ctrl-C there reached CMD too.
func terminalSentIt() bool {
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}

// runTUI runs cmd on a pseudo-terminal of its own, its output in the TUI's
// output pane. Ctrl-C goes to CMD first; a second one quits. Once the TUI
// is quit, a CMD still running gets SIGHUP (its terminal went away) and,
// 5 s later, SIGKILL.
func runTUI(cmd *exec.Cmd, name string, in *ingest.Ingest, opt ui.Options, csvPath string, fps int, stderr io.Writer) (int, string) {
	pty, err := runner.OpenPTY()
	if err != nil {
		say(stderr, "gputop run:", err)
		return 1, "not started"
	}
	defer pty.Master.Close()
	// the pane's size until the TUI says: the terminal's width, a third of its height
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil {
		pty.SetSize(int(ws.Col), max(int(ws.Row)/3, 3))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pty.Slave, pty.Slave, pty.Slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		pty.Slave.Close()
		say(stderr, "gputop run:", startErr(cmd, err))
		return 126, "could not start"
	}
	pty.Slave.Close()
	out := &runner.Output{}
	copied := make(chan struct{})
	go func() { io.Copy(out, pty.Master); close(copied) }()
	var mu sync.Mutex
	var code int
	var how string
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		c, h := runner.Ended(cmd.ProcessState)
		mu.Lock()
		code, how = c, h
		mu.Unlock()
		close(done)
	}()
	ended := func() (bool, string) {
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			return true, how
		default:
			return false, fmt.Sprintf("running (pid %d)", cmd.Process.Pid)
		}
	}
	group := func() int {
		if g := pty.Foreground(); g > 0 {
			return g
		}
		return cmd.Process.Pid
	}
	opt.CSVPath, opt.FPS, opt.Now, opt.Title = csvPath, fps, time.Now, "run: "+name
	opt.WriteCSV = func(path string) error { return summary.WriteStoreCSV(path, in.Store()) }
	model := ui.NewRun(ui.New(in, opt), ui.Command{
		Name:      name,
		Lines:     out.Tail,
		Gen:       out.Gen,
		Ended:     ended,
		Interrupt: func() error { return unix.Kill(-group(), unix.SIGINT) },
		Resize:    func(cols, rows int) { pty.SetSize(cols, rows) },
	})
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	_, terr := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(fps)).Run()
	signalled := ctx.Err() != nil
	if terr != nil && !errors.Is(terr, tea.ErrProgramKilled) && !errors.Is(terr, context.Canceled) {
		say(stderr, "gputop run:", terr)
	}
	if signalled && csvPath != "" {
		if err := opt.WriteCSV(csvPath); err != nil {
			say(stderr, "gputop run:", err)
		}
	}
	select {
	case <-done:
	default:
		unix.Kill(-cmd.Process.Pid, unix.SIGHUP)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			<-done
		}
	}
	pty.Master.Close()
	select {
	case <-copied:
	case <-time.After(time.Second): // a grandchild still holds the terminal
	}
	mu.Lock()
	defer mu.Unlock()
	say(stderr, fmt.Sprintf("gputop run: %s %s", name, how))
	return code, how
}

// drainAgents waits until no agent of the run is connected (each has said
// bye or its process has gone), at most d: a process CMD left running in
// the background must not hold the summary back.
func drainAgents(st *store.Store, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		connected := false
		for _, a := range st.Agents() {
			connected = connected || a.Connected
		}
		if !connected {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentSummary says which processes reported to gputop, or why none did.
func agentSummary(st *store.Store, ag agentInjection) []string {
	inj := ag.inj
	if !ag.on || inj == nil {
		return nil
	}
	agents := st.Agents()
	ev := inj.Events()
	var out []string
	if len(agents) > 0 {
		pids := make([]string, len(agents))
		for i, a := range agents {
			pids[i] = fmt.Sprint(a.Hello.PID)
		}
		out = append(out, fmt.Sprintf("agent attached in %d process(es): pid %s", len(agents), strings.Join(pids, ", ")))
	} else {
		switch {
		case ev.Pythons == 0:
			out = append(out, "no agent attached: no Python process ran under CMD with gputop's sitecustomize (CMD is not Python, or runs it with -E, -I or -S, which ignore PYTHONPATH); NVML only")
		case ev.Torch == 0 && ev.Frameworks == 0:
			out = append(out, fmt.Sprintf("no agent attached: Python ran (%d process(es)) but none imported torch, jax or cupy", ev.Pythons))
		case ev.Torch == 0:
			out = append(out, "no agent attached: jax or cupy was imported but no agent reached "+inj.Socket)
		case ev.CUDA == 0 && ev.Frameworks == 0:
			out = append(out, "no agent attached: torch was imported but CUDA was never used")
		default:
			out = append(out, "no agent attached: CUDA was used but no agent reached "+inj.Socket)
		}
	}
	for _, r := range ev.NoAgent {
		out = append(out, "agent: "+r)
	}
	if len(ev.NoAgent) > 0 && inj.AgentDir == "" {
		out = append(out, "agent: gputop found no agent package beside its binary; pip install it, or set GPUTOP_AGENT_PATH to the directory that holds gputop/")
	}
	return out
}

func lookErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		if errors.Is(ee.Err, exec.ErrNotFound) {
			return errors.New("command not found in $PATH")
		}
		return ee.Err
	}
	return err
}

func startErr(cmd *exec.Cmd, err error) string {
	return fmt.Sprintf("cannot start %s: %v", cmd.Path, err)
}

func isOff(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "false", "no", "off":
		return true
	}
	return false
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// historyEnv is what turns the agent's allocation history on in CMD's
// processes (attach reads GPUTOP_HISTORY), and where their dumps go: beside
// the recording, in FILE.dumps/, unless GPUTOP_DUMP_DIR already says.
func historyEnv(entries int, record, dumpDir string) []string {
	if entries <= 0 {
		return nil
	}
	env := []string{"GPUTOP_HISTORY=" + strconv.Itoa(entries)}
	if dumpDir == "" && record != "" {
		env = append(env, "GPUTOP_DUMP_DIR="+record+".dumps")
	}
	return env
}
