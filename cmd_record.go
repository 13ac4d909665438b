// gputop record: a headless recording. gputop serve (cmd_serve.go) is the
// same run with the file optional.

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

	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// headless is a run with no terminal: record's and serve's options.
type headless struct {
	name     string // "gputop record", "gputop serve": how messages begin
	sources  sourceFlags
	out      string // the recording to write; "" writes none (serve)
	force    bool
	comment  string
	duration time.Duration
}

// register adds the options record and serve share.
func (h *headless) register(fs *flag.FlagSet) {
	fs.DurationVar(&h.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fs.StringVar(&h.comment, "comment", "", "free text stored in the recording's header")
	fs.BoolVar(&h.force, "force", false, "replace FILE if it already holds data (without it an existing file is never truncated)")
}

func cmdRecord(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop record", stderr, "\ngputop record -o FILE [flags]\n")
	h := headless{name: "gputop record"}
	h.sources.register(fs)
	fs.StringVar(&h.out, "o", "", "recording file to write (required)")
	h.register(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if h.out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "gputop record: -o FILE is required and takes no other arguments")
		fs.Usage()
		return 2
	}
	return h.run(stderr)
}

// run samples until SIGINT, SIGTERM or the duration, writing the recording
// when there is one, and prints the store's events on stderr.
func (h headless) run(stderr io.Writer) int {
	sf := &h.sources
	if err := sf.validate(); err != nil {
		fmt.Fprintln(stderr, h.name+":", err)
		return 2
	}
	// the output is looked at now and opened only once the sources have
	// started: a recorder that cannot start touches nothing
	if h.out != "" {
		if _, err := outfile.CheckStream(h.out, h.force); err != nil {
			say(stderr, h.name+":", forceHint(err))
			return 1
		}
	}
	host, _ := os.Hostname()
	var events eventPrinter
	log := logbook.New()
	log.OnAdd(events.add)
	st := store.New(logTo(store.DefaultOptions(), log))
	var w *recording.Writer
	if h.out != "" {
		w = recording.NewWriter(wire.Recording{
			Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Host: host,
			Tool: "gputop " + version, RateHz: int(sf.rate), Comment: h.comment,
		})
		st.SetTap(w)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if h.duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, h.duration)
		defer c()
	}
	srv, stop, err := sf.start(ctx, st, log)
	if err != nil {
		if w != nil {
			w.Close()
		}
		say(stderr, h.name+":", err)
		return 1
	}
	if w != nil {
		f, err := outfile.OpenStream(ctx, h.out, h.force, func() {
			say(stderr, fmt.Sprintf("%s: %s is a FIFO: waiting for a reader", h.name, h.out))
		})
		if err == nil {
			err = w.Start(f, h.out)
		}
		if err != nil {
			cancel()
			stop()
			w.Close()
			events.flush(stderr, h.name+": ")
			say(stderr, h.name+":", forceHint(err))
			return 1
		}
	}
	where := ""
	if srv != nil {
		where = ", agents on " + srv.Path()
	}
	if w != nil {
		say(stderr, fmt.Sprintf("%s: writing %s (source %s%s); Ctrl-C ends it", h.name, h.out, sf.source, where))
	} else {
		say(stderr, fmt.Sprintf("%s: sampling (source %s%s); Ctrl-C ends it", h.name, sf.source, where))
	}
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
			events.flush(stderr, h.name+": ")
			if w == nil {
				continue
			}
			if d := w.Stats().Drops(); d != told && time.Since(toldAt) >= time.Second {
				say(stderr, fmt.Sprintf("%s: %s is not keeping up: dropped so far %s", h.name, h.out, d))
				told, toldAt = d, time.Now()
			}
			if err := w.Err(); err != nil {
				say(stderr, h.name+":", err)
				break loop
			}
		}
	}
	cancel()
	stop()
	if w == nil {
		events.flush(stderr, h.name+": ")
		say(stderr, fmt.Sprintf("%s: stopped: %d snapshots", h.name, len(st.Snapshots())))
		return 0
	}
	err = w.Close()
	events.flush(stderr, h.name+": ")
	s := w.Stats()
	say(stderr, fmt.Sprintf("%s: %s: %d snapshots, %d bytes", h.name, h.out, len(st.Snapshots()), s.Bytes))
	code := 0
	if err != nil {
		say(stderr, h.name+":", err)
		code = 1
	}
	if d := s.Drops(); d.Any() {
		say(stderr, fmt.Sprintf("%s: %s: not everything was written: dropped %s (the file says so, and loads)", h.name, h.out, d))
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
