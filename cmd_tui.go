// gputop [flags], --demo, --replay FILE: the TUI.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/demo"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/ui"
	"github.com/gputop/gputop/view"
)

func cmdTUI(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop", stderr, "")
	var sf sourceFlags
	sf.register(fs)
	sf.registerSSH(fs)
	demoFlag := fs.Bool("demo", false, "play the recording embedded in the binary")
	replay := fs.String("replay", "", "play the recording `FILE`")
	csvPath := fs.String("csv", "", "write the summary CSV to `PATH` on the e key and on quitting (default ./gputop-summary-YYYYmmdd-HHMMSS.csv on e, nothing on quit); a file (replaced atomically), FIFO or device, not - (the TUI draws on standard output)")
	fps := fs.Int("fps", 30, "at most `N` screen redraws per second")
	recordPath := fs.String("record", "", "live: also write a recording to `FILE`, as gputop record does, with the rows renamed and deleted in the TUI (a FILE that holds data is refused)")
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
	if sf.metrics != "" && (*demoFlag || *replay != "") {
		fmt.Fprintln(stderr, "gputop: --metrics serves what a live gputop samples; not with --demo or --replay")
		return 2
	}
	if *fps < 1 || *fps > 120 {
		fmt.Fprintf(stderr, "gputop: --fps %d: want 1..120\n", *fps)
		return 2
	}
	if *csvPath != "" {
		t, err := outfile.Resolve(*csvPath)
		if err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
			fmt.Fprintf(stderr, "gputop: --csv %s: the TUI draws on standard output, so the CSV cannot go there; give a file name (or write a recording's CSV to standard output with `gputop export FILE --csv -`)\n", *csvPath)
			return 2
		}
		if refusedLink(err) {
			say(stderr, "gputop: --csv:", err)
			return 2
		}
	}
	if *recordPath != "" && (*demoFlag || *replay != "") {
		fmt.Fprintln(stderr, "gputop: --record records live sources; it does not go with --demo or --replay")
		return 2
	}
	log := logbook.New()
	opt := ui.Options{CSVPath: *csvPath, FPS: *fps, Now: time.Now, Log: log}
	var st *store.Store
	var in *ingest.Ingest // st's way in: the sources', the snapshot key's, a row edit's
	// a closed terminal (SIGHUP) or kill (SIGTERM) ends the TUI like q does,
	// so --csv is still written
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	stop := func() {}
	recordFailed := false // --record could not write everything
	var load *replayLoad  // --replay: the file loads while the TUI shows how far it got
	switch {
	case *demoFlag:
		st = store.New(logTo(replayOptions(), log))
		in = ingest.New(st)
		info, err := recording.LoadInto("demo", bytes.NewReader(demo.Recording), in)
		if info.Dropped.Any() {
			log.Add(droppedNote(info.Dropped))
		}
		if err != nil {
			opt.LoadErr = err.Error()
		}
		opt.Title = "demo: " + demo.Title
		opt.Replay = true
		// open where the whole run's story is on screen, found in its rows
		opt.OpenAt, _ = view.StoryMoment(st)
	case *replay != "":
		st = store.New(logTo(replayOptions(), log))
		in = ingest.New(st)
		var err error
		if load, err = startReplay(ctx, *replay, in, log); err != nil {
			if ctx.Err() != nil {
				return 0 // closed or killed before anything loaded
			}
			say(stderr, "gputop:", err)
			return 1
		}
		opt.Title = *replay
		opt.Replay = true
	default:
		st = store.New(logTo(store.DefaultOptions(), log))
		in = ingest.New(st)
		rec, err := newTUIRecorder(*recordPath, sf.rate, in)
		if err != nil {
			say(stderr, "gputop:", err)
			return 1
		}
		srv, s, err := sf.start(ctx, in, log)
		if err == nil {
			if err = rec.open(ctx, stderr); err != nil {
				s()
			}
		}
		if err != nil {
			say(stderr, "gputop:", err)
			return 1
		}
		stop = func() {
			s()
			if rec.close(stderr) != nil {
				recordFailed = true
			}
		}
		if srv != nil {
			opt.RequestHolders = srv.RequestHolders
			opt.RequestDump = srv.RequestDump
			log.Add("agents: listening on " + srv.Path())
		}
	}
	opt.WriteCSV = func(path string) error { return snapshot.WriteStoreCSV(path, st) }
	var model tea.Model = ui.New(in, opt)
	if load != nil {
		model = ui.NewLoading(in, opt, load.ui())
	}
	_, err := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(*fps)).Run()
	signalled := ctx.Err() != nil
	cancel() // stops a load still running
	stop()
	// a load given up leaves nothing to write: the CSV would lack rows
	if signalled && *csvPath != "" && (load == nil || load.complete()) {
		if werr := opt.WriteCSV(*csvPath); werr != nil || recordFailed {
			if werr != nil {
				say(stderr, "gputop:", werr)
			}
			return 1
		}
		return 0
	}
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "gputop:", err)
		return 1
	}
	if recordFailed {
		return 1
	}
	return 0
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
