// gputop record: a headless recording.

package main

import (
	"context"
	"errors"
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

func cmdRecord(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop record", stderr, "\ngputop record -o FILE [flags]\n")
	var sf sourceFlags
	sf.register(fs)
	sf.registerSSH(fs)
	out := fs.String("o", "", "recording `FILE` to write (required)")
	duration := fs.Duration("duration", 0, "stop after `D`, a duration such as 90s or 5m (default: until Ctrl-C)")
	comment := fs.String("comment", "", "free `TEXT` stored in the recording's header")
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
	if given(fs, "duration") && *duration <= 0 {
		fmt.Fprintf(stderr, "gputop record: --duration %v: want a positive duration such as 90s or 5m (leave it out to record until Ctrl-C)\n", *duration)
		return 2
	}
	// the output is looked at now and opened only once the sources have
	// started: a recorder that cannot start touches nothing
	if _, err := outfile.CheckStream(*out, *force); err != nil {
		say(stderr, "gputop record:", forceHint(err))
		return 1
	}
	hosts, _ := sf.hosts()
	w := newRecordingWriter(sf.rate, "", *comment, hosts)
	var events eventPrinter
	log := logbook.New()
	log.OnAdd(events.add)
	st := store.New(logTo(store.DefaultOptions(), log))
	in := ingest.New(st)
	in.SetTap(w)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, *duration)
		defer c()
	}
	srv, stop, err := sf.start(ctx, in, log)
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
			if d := w.Stats().Drops(); d.Behind() != told.Behind() && time.Since(toldAt) >= time.Second {
				say(stderr, fmt.Sprintf("gputop record: %s is not keeping up: dropped so far %s", *out, d.Behind()))
				told.NVMLSamples, told.AgentSamples, told.Frames, toldAt = d.NVMLSamples, d.AgentSamples, d.Frames, time.Now()
			} else if d.TooLong != told.TooLong {
				// not the output's fault: said at once, whatever its pace
				say(stderr, fmt.Sprintf("gputop record: %s: dropped so far %s", *out, recording.TooLongText(d.TooLong)))
				told.TooLong = d.TooLong
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
	if d := w.DropSummary(); d != "" {
		say(stderr, fmt.Sprintf("gputop record: %s: %s", *out, d))
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
