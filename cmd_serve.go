// gputop serve: NVML sampling and the agent socket with no terminal, until
// SIGINT or SIGTERM; with --stdio, the live stream on standard output as a
// recording's frames (what gputop --ssh reads from each host); with -o
// FILE, a recording; with --metrics, Prometheus's endpoint (a cluster node).

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

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// serveOptions are gputop serve's flags.
type serveOptions struct {
	sources sourceFlags
	// stdio writes the stream to standard output and ends at the end of
	// standard input: the remote end of gputop --ssh, whose ssh closes
	// stdin when the viewer goes.
	stdio bool
	// out is a recording to write as well ("": none), force lets it
	// replace a file that holds data
	out   string
	force bool
}

func (o *serveOptions) register(fs *flag.FlagSet) {
	o.sources.register(fs)
	fs.BoolVar(&o.stdio, "stdio", false, "write the live stream to standard output as a recording's frames, until standard input ends (for gputop --ssh)")
	fs.StringVar(&o.out, "o", "", "also write a recording to `FILE` (default: none)")
	fs.BoolVar(&o.force, "force", false, "let -o replace FILE if it already holds data")
}

func cmdServe(args []string, stdin io.Reader, stdout *os.File, stderr io.Writer) int {
	fs := newFlagSet("gputop serve", stderr, "\ngputop serve [--stdio | -o FILE] [--metrics ADDR] [flags]\n")
	var o serveOptions
	o.register(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop serve: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if err := o.sources.validate(); err != nil {
		fmt.Fprintln(stderr, "gputop serve:", err)
		return 2
	}
	if o.sources.source == "none" {
		fmt.Fprintln(stderr, "gputop serve: --source none: serve has nothing but this machine's sources to serve")
		return 2
	}
	if o.stdio && o.out != "" {
		fmt.Fprintln(stderr, "gputop serve: --stdio and -o: one stream at a time (record the --ssh view with gputop record --ssh)")
		return 2
	}
	// the output is looked at now and opened once the sources have
	// started, as record does
	if o.out != "" {
		if _, err := outfile.CheckStream(o.out, o.force); err != nil {
			say(stderr, "gputop serve:", forceHint(err))
			return 1
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var events eventPrinter
	log := logbook.New()
	log.OnAdd(events.add)
	st := store.New(logTo(store.DefaultOptions(), log))
	in := ingest.New(st)
	var w *recording.Writer // to -o FILE or, with --stdio, standard output
	if o.out != "" || o.stdio {
		w = newRecordingWriter(o.sources.rate, "", "", nil)
		in.SetTap(w)
	}
	if o.stdio {
		// a viewer that went away is a write error (EPIPE) ending serve,
		// not a SIGPIPE killing it with its socket left behind
		signal.Ignore(syscall.SIGPIPE)
		go func() {
			// the end of stdin (ssh closing it) ends serve
			io.Copy(io.Discard, stdin)
			cancel()
		}()
	}
	_, stop, err := o.sources.start(ctx, in, log)
	if err != nil {
		if w != nil {
			w.Close()
		}
		say(stderr, "gputop serve:", err)
		return 1
	}
	if w != nil && o.out != "" {
		f, err := outfile.OpenStream(ctx, o.out, o.force, func() {
			say(stderr, fmt.Sprintf("gputop serve: %s is a FIFO: waiting for a reader", o.out))
		})
		if err == nil {
			err = w.Start(f, o.out)
		}
		if err != nil {
			cancel()
			stop()
			w.Close()
			events.flush(stderr, "gputop serve: ")
			say(stderr, "gputop serve:", forceHint(err))
			return 1
		}
	} else if w != nil {
		if err := w.Start(stdout, "standard output"); err != nil {
			cancel()
			stop()
			say(stderr, "gputop serve:", err)
			return 1
		}
	}
	eventOut := stderr
	if o.stdio {
		eventOut = io.Discard
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	code := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			// agents attaching, refused, closed with a reason go to stderr;
			// with --stdio stderr is kept for errors alone, since gputop
			// --ssh quotes its last line as the reason a host dropped
			events.flush(eventOut, "gputop serve: ")
			if w == nil {
				continue
			}
			if err := w.Err(); err != nil {
				say(stderr, "gputop serve:", err)
				code = 1
				break loop
			}
		}
	}
	cancel()
	stop()
	if w != nil {
		// with --stdio a write error is the viewer going away, and drops
		// are in the stream; an output that stopped taking lines is said
		err := w.Close()
		if err != nil && (o.out != "" || errors.Is(err, recording.ErrStalled)) {
			say(stderr, "gputop serve:", err)
			code = 1
		}
		if d := w.DropSummary(); d != "" && (o.out != "" || errors.Is(err, recording.ErrStalled)) {
			say(stderr, fmt.Sprintf("gputop serve: %s: %s", w.Path(), d))
			code = 1
		}
	}
	events.flush(eventOut, "gputop serve: ")
	return code
}
