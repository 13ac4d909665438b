// gputop [flags], --demo, --replay FILE: the TUI.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/session"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/ui"
)

// tuiFlags are the TUI's flags.
type tuiFlags struct {
	sources             sourceFlags
	demo                bool
	replay, csv, record string
	fps                 int
}

func (f *tuiFlags) register(fs *flag.FlagSet) {
	f.sources.register(fs)
	f.sources.registerSSH(fs)
	fs.BoolVar(&f.demo, "demo", false, "play the recording embedded in the binary")
	fs.StringVar(&f.replay, "replay", "", "play the recording `FILE`")
	fs.StringVar(&f.csv, "csv", "", "write the summary CSV to `PATH` on the e key and on quitting (default ./gputop-summary-YYYYmmdd-HHMMSS.csv on e, nothing on quit); a file (replaced atomically), FIFO or device, not - (the TUI draws on standard output)")
	fs.IntVar(&f.fps, "fps", defaultFPS, "at most `N` screen redraws per second")
	fs.StringVar(&f.record, "record", "", "live: also write a recording to `FILE`, as gputop record does, with the rows renamed and deleted in the TUI (a FILE that holds data is refused)")
}

// check says what is wrong with the command line as a whole.
func (f *tuiFlags) check(fs *flag.FlagSet) error {
	if err := noArguments(fs); err != nil {
		return err
	}
	if err := f.sources.validate(); err != nil {
		return err
	}
	played := f.demo || f.replay != ""
	if f.sources.metrics != "" && played {
		return errors.New("--metrics serves what a live gputop samples; not with --demo or --replay")
	}
	if f.fps < 1 || f.fps > 120 {
		return fmt.Errorf("--fps %d: want 1..120", f.fps)
	}
	if f.csv != "" {
		t, err := outfile.Resolve(f.csv)
		if err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
			return fmt.Errorf("--csv %s: the TUI draws on standard output, so the CSV cannot go there; give a file name (or write a recording's CSV to standard output with `gputop export FILE --csv -`)", f.csv)
		}
		if refusedLink(err) {
			return fmt.Errorf("--csv: %w", err)
		}
	}
	if f.record != "" && played {
		return errors.New("--record records live sources; it does not go with --demo or --replay")
	}
	return nil
}

func cmdTUI(args []string, stderr io.Writer) int {
	var f tuiFlags
	if _, code := parseCommand("gputop", "", &f, args, stderr); code >= 0 {
		return code
	}
	if err := checkTUIRecord(f.record); err != nil {
		say(stderr, "gputop:", err)
		return 1
	}
	// a closed terminal (SIGHUP) or kill (SIGTERM) ends the TUI like q does,
	// so --csv is still written
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	log := logbook.New()
	opt := ui.Options{CSVPath: f.csv, FPS: f.fps, Now: time.Now, Log: log}
	src, err := f.open(ctx, log, &opt, stderr)
	if err != nil {
		if f.replay != "" && ctx.Err() != nil {
			return 0 // closed or killed before anything loaded
		}
		say(stderr, "gputop:", err)
		return 1
	}
	st := src.in.Store()
	opt.WriteCSV = func(path string) error { return summary.WriteStoreCSV(path, st) }
	var model tea.Model = ui.New(src.in, opt)
	if src.load != nil {
		model = ui.NewLoading(src.in, opt, src.load.ui())
	}
	final, err := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(f.fps)).Run()
	writeFrameStats(final)
	signalled := ctx.Err() != nil
	cancel() // stops a load still running
	code := 0
	if src.stop(stderr) {
		code = 1 // --record could not write everything
	}
	// a load given up leaves nothing to write: the CSV would lack rows
	if signalled && f.csv != "" && src.complete() {
		if werr := opt.WriteCSV(f.csv); werr != nil {
			say(stderr, "gputop:", werr)
			return 1
		}
		return code
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "gputop:", err)
		return 1
	}
	return code
}

// tuiSource is what the TUI shows: a store, through its ingest, and what
// ends it.
type tuiSource struct {
	in     *ingest.Ingest
	load   *replayLoad      // --replay: the file loading behind the TUI
	ses    *session.Session // live
	record string           // live: --record's path
}

// open opens what the flags ask the TUI to show, filling in opt's title
// and what the UI may ask of it.
func (f *tuiFlags) open(ctx context.Context, log *logbook.Book, opt *ui.Options, stderr io.Writer) (tuiSource, error) {
	switch {
	case f.demo:
		return openDemo(log, opt), nil
	case f.replay != "":
		return openReplay(ctx, f.replay, log, opt)
	}
	so := f.sources.options(log)
	if f.record != "" {
		so.Record = &session.Record{Path: f.record, Writer: " (TUI)", Waiting: func() {
			say(stderr, fmt.Sprintf("gputop: --record %s is a FIFO: waiting for a reader", f.record))
		}}
	}
	ses, err := f.sources.start(ctx, so)
	var oe *session.OutputError
	if errors.As(err, &oe) {
		return tuiSource{}, recordPathErr(f.record, oe.Err)
	}
	if err != nil {
		return tuiSource{}, err
	}
	askAgents(opt, ses)
	return tuiSource{in: ses.Ingest(), ses: ses, record: f.record}, nil
}

// askAgents gives the UI what it may ask of the session's agents (a
// holders walk, a memory dump), and logs where they connect.
func askAgents(opt *ui.Options, ses *session.Session) {
	if srv := ses.Agents(); srv != nil {
		opt.RequestHolders = srv.RequestHolders
		opt.RequestDump = srv.RequestDump
		ses.Log().Add("agents: listening on " + srv.Path())
	}
}

// stop ends a live session and says what went wrong with its recording;
// it reports whether anything did.
func (s tuiSource) stop(stderr io.Writer) bool {
	if s.ses == nil {
		return false
	}
	prefix := "gputop: --record " + s.record + ":"
	return sayRecordingEnd(stderr, s.ses.Stop(), prefix, prefix)
}

// complete reports whether what the TUI showed was whole: live, the demo,
// or a replay loaded to its end (or up to a bad line).
func (s tuiSource) complete() bool { return s.load == nil || s.load.complete() }

// checkTUIRecord looks at --record's path ("": none) before anything
// starts, as record -o does; a file that holds data is refused (the TUI
// has no --force), and so is standard output, where the TUI draws.
func checkTUIRecord(path string) error {
	if path == "" {
		return nil
	}
	t, err := outfile.CheckStream(path, false)
	if err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
		err = errors.New("the TUI draws on standard output, so the recording cannot go there; give a file name (or use gputop record -o -)")
	}
	return recordPathErr(path, err)
}

// recordPathErr is an error of --record's path, as the TUI says it.
func recordPathErr(path string, err error) error {
	if err == nil {
		return nil
	}
	var he *outfile.HoldsDataError
	if errors.As(err, &he) {
		err = fmt.Errorf("%w; give another name (gputop record --force replaces a recording)", err)
	}
	return fmt.Errorf("--record %s: %w", path, err)
}

// logTo makes the store's notes go to log.
func logTo(o store.Options, log *logbook.Book) store.Options {
	o.Log = log.Add
	return o
}

// replayOptions keep a whole recording at full resolution up to ~33 min at
// 1 kHz; older parts of longer recordings come from the min/max tiers.
func replayOptions() store.Options {
	o := store.DefaultOptions()
	o.RawCapacity = 2_000_000
	o.KeepGone, o.KeepEnded = 0, 0 // a recording is shown whole
	return o
}

// writeFrameStats writes how many ticks the TUI handled and frames it drew
// to the file GPUTOP_FRAMESTATS names, if any: the e2e tests hold a still
// screen to drawing nothing by it.
func writeFrameStats(m tea.Model) {
	path := os.Getenv("GPUTOP_FRAMESTATS")
	s, ok := m.(interface{ Stats() ui.Stats })
	if path == "" || !ok {
		return
	}
	st := s.Stats()
	if err := os.WriteFile(path, fmt.Appendf(nil, "ticks %d\nframes %d\n", st.Ticks, st.Frames), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gputop: GPUTOP_FRAMESTATS:", err)
	}
}
