// gputop record: a headless recording.

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/session"
)

// recordFlags are gputop record's flags.
type recordFlags struct {
	sources      sourceFlags
	out, comment string
	duration     time.Duration
	force        bool
}

func (f *recordFlags) register(fs *flag.FlagSet) {
	f.sources.register(fs)
	f.sources.registerSSH(fs)
	fs.StringVar(&f.out, "o", "", "recording `FILE` to write (required)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after `D`, a duration such as 90s or 5m (default: until Ctrl-C)")
	fs.StringVar(&f.comment, "comment", "", "free `TEXT` stored in the recording's header")
	fs.BoolVar(&f.force, "force", false, "replace FILE if it already holds data (without it an existing file is never truncated)")
}

// check says what is wrong with the command line as a whole.
func (f *recordFlags) check(fs *flag.FlagSet) error {
	if f.out == "" || fs.NArg() > 0 {
		return usageError("-o FILE is required and takes no other arguments")
	}
	if err := f.sources.validate(); err != nil {
		return err
	}
	if given(fs, "duration") && f.duration <= 0 {
		return fmt.Errorf("--duration %v: want a positive duration such as 90s or 5m (leave it out to record until Ctrl-C)", f.duration)
	}
	return nil
}

func cmdRecord(args []string, stderr io.Writer) int {
	var f recordFlags
	if _, code := parseCommand("gputop record", "", &f, args, stderr); code >= 0 {
		return code
	}
	ctx, cancel := interrupted()
	defer cancel()
	if f.duration > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, f.duration)
		defer c()
	}
	var events eventPrinter
	log := logbook.New()
	log.OnAdd(events.add)
	// the output is looked at first and opened only once the sources have
	// started: a recorder that cannot start touches nothing
	opt := f.sources.options(log)
	opt.Record = &session.Record{Path: f.out, Force: f.force, Comment: f.comment, Waiting: func() {
		say(stderr, fmt.Sprintf("gputop record: %s is a FIFO: waiting for a reader", f.out))
	}}
	ses, err := f.sources.start(ctx, opt)
	if err != nil {
		events.flush(stderr, "gputop record: ")
		say(stderr, "gputop record:", forceHint(err))
		return 1
	}
	where := ""
	if srv := ses.Agents(); srv != nil {
		where = ", agents on " + srv.Path()
	}
	say(stderr, fmt.Sprintf("gputop record: writing %s (source %s%s); Ctrl-C ends it", f.out, f.sources.source, where))
	var drops dropTeller
	if err := watch(ctx, ses, func() {
		// agent events (attached, closed with a reason) go to stderr
		events.flush(stderr, "gputop record: ")
		drops.tell(stderr, f.out, ses.RecordStats().Drops())
	}); err != nil {
		say(stderr, "gputop record:", err)
	}
	ended := ses.Stop()
	events.flush(stderr, "gputop record: ")
	say(stderr, fmt.Sprintf("gputop record: %s: %d rows, %d bytes", f.out, len(ses.Store().Rows()), ended.Stats.Bytes))
	if sayRecordingEnd(stderr, ended, "gputop record:", "gputop record: "+f.out+":") {
		return 1
	}
	return 0
}

// dropTeller says, while record runs, what the recording has dropped so
// far: what the output did not keep up with at most once a second, frames
// too long at once.
type dropTeller struct {
	told recording.Drops // drops printed so far
	at   time.Time
}

func (t *dropTeller) tell(stderr io.Writer, out string, d recording.Drops) {
	if d.Behind() != t.told.Behind() && time.Since(t.at) >= time.Second {
		say(stderr, fmt.Sprintf("gputop record: %s is not keeping up: dropped so far %s", out, d.Behind()))
		t.told.NVMLSamples, t.told.AgentSamples, t.told.Frames, t.at = d.NVMLSamples, d.AgentSamples, d.Frames, time.Now()
	} else if d.TooLong != t.told.TooLong {
		// not the output's fault: said at once, whatever its pace
		say(stderr, fmt.Sprintf("gputop record: %s: dropped so far %s", out, recording.TooLongText(d.TooLong)))
		t.told.TooLong = d.TooLong
	}
}
