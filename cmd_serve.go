// gputop serve: NVML sampling and the agent socket with no terminal, until
// SIGINT or SIGTERM; with --stdio, the live stream on standard output as a
// recording's frames (what gputop --ssh reads from each host); with -o
// FILE, a recording; with --metrics, Prometheus's endpoint (a cluster node).

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/session"
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

// check says what is wrong with the command line as a whole.
func (o *serveOptions) check(fs *flag.FlagSet) error {
	if err := noArguments(fs); err != nil {
		return err
	}
	if err := o.sources.validate(); err != nil {
		return err
	}
	if o.sources.source == "none" {
		return errors.New("--source none: serve has nothing but this machine's sources to serve")
	}
	if o.stdio && o.out != "" {
		return errors.New("--stdio and -o: one stream at a time (record the --ssh view with gputop record --ssh)")
	}
	return nil
}

// record is where serve's recording goes: standard output with --stdio,
// -o FILE, or nowhere (nil).
func (o *serveOptions) record(stdout *os.File, stderr io.Writer) *session.Record {
	switch {
	case o.stdio:
		return &session.Record{Out: stdout}
	case o.out != "":
		return &session.Record{Path: o.out, Force: o.force, Waiting: func() {
			say(stderr, fmt.Sprintf("gputop serve: %s is a FIFO: waiting for a reader", o.out))
		}}
	}
	return nil
}

func cmdServe(args []string, stdin io.Reader, stdout *os.File, stderr io.Writer) int {
	var o serveOptions
	if _, code := parseCommand("gputop serve", "", &o, args, stderr); code >= 0 {
		return code
	}
	ctx, cancel := interrupted()
	defer cancel()
	// agents attaching, refused, closed with a reason go to stderr; with
	// --stdio stderr is kept for errors alone, since gputop --ssh quotes
	// its last line as the reason a host dropped
	var events eventPrinter
	eventOut := stderr
	if o.stdio {
		eventOut = io.Discard
	}
	log := logbook.New()
	log.OnAdd(events.add)
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
	// -o's output is looked at first and opened once the sources have
	// started, as record does
	opt := o.sources.options(log)
	opt.Record = o.record(stdout, stderr)
	ses, err := o.sources.start(ctx, opt)
	if err != nil {
		events.flush(eventOut, "gputop serve: ")
		say(stderr, "gputop serve:", forceHint(err))
		return 1
	}
	code := 0
	if err := watch(ctx, ses, func() { events.flush(eventOut, "gputop serve: ") }); err != nil {
		say(stderr, "gputop serve:", err)
		code = 1
	}
	ended := ses.Stop()
	// with --stdio a write error is the viewer going away, and drops are
	// in the stream; an output that stopped taking lines is said
	if o.out != "" || errors.Is(ended.Err, recording.ErrStalled) {
		if sayRecordingEnd(stderr, ended, "gputop serve:", "gputop serve: "+ended.Path+":") {
			code = 1
		}
	}
	events.flush(eventOut, "gputop serve: ")
	return code
}
