// gputop serve: NVML sampling and the agent socket with no terminal; with
// --stdio, the live stream on standard output as a recording's frames
// (what gputop --ssh reads from each host).

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// serveOptions are gputop serve's flags.
type serveOptions struct {
	sources sourceFlags
	// stdio writes the stream to standard output and ends at the end of
	// standard input: the remote end of gputop --ssh, whose ssh closes
	// stdin when the viewer goes.
	stdio bool
}

func (o *serveOptions) register(fs *flag.FlagSet) {
	o.sources.register(fs)
	fs.BoolVar(&o.stdio, "stdio", false, "write the live stream to standard output as a recording's frames, until standard input ends (for gputop --ssh)")
}

func cmdServe(args []string, stdin io.Reader, stdout *os.File, stderr io.Writer) int {
	fs := newFlagSet("gputop serve", stderr, "\ngputop serve [--stdio] [flags]\n")
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
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var events eventPrinter
	log := logbook.New()
	log.OnAdd(events.add)
	st := store.New(logTo(store.DefaultOptions(), log))
	var w *recording.Writer
	if o.stdio {
		// a viewer that went away is a write error (EPIPE) ending serve,
		// not a SIGPIPE killing it with its socket left behind
		signal.Ignore(syscall.SIGPIPE)
		host, _ := os.Hostname()
		w = recording.NewWriter(wire.Recording{
			Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Host: host,
			Tool: toolVersion(), RateHz: int(o.sources.rate),
		})
		st.SetTap(w)
		go func() {
			// the end of stdin (ssh closing it) ends serve
			io.Copy(io.Discard, stdin)
			cancel()
		}()
	}
	_, stop, err := o.sources.start(ctx, st, log)
	if err != nil {
		if w != nil {
			w.Close()
		}
		say(stderr, "gputop serve:", err)
		return 1
	}
	if w != nil {
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
		w.Close()
	}
	events.flush(eventOut, "gputop serve: ")
	return code
}
