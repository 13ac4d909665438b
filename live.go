// What the live commands share besides their flags (sources.go): the
// context of one with no terminal of its own, what it prints on stderr
// while it runs (the log's events, in order however many), and how a
// recording's end is said.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/session"
)

// maxPendingEvents bounds the log lines waiting for stderr: a terminal that
// is not being read (a stopped pager) must not grow the recorder without
// bound. Past it lines are counted, and the count printed, instead.
const maxPendingEvents = 100_000

// eventPrinter prints every line of the log, in order, however many: the
// log keeps only its last 200, and the sources that log must not
// wait for stderr, so lines wait here until flush prints them.
type eventPrinter struct {
	mu      sync.Mutex
	pending []string
	lost    int
}

// add is the log's OnAdd hook.
func (p *eventPrinter) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) >= maxPendingEvents {
		p.lost++
		return
	}
	p.pending = append(p.pending, line)
}

// flush prints the waiting lines, each after prefix.
func (p *eventPrinter) flush(w io.Writer, prefix string) {
	p.mu.Lock()
	lines, lost := p.pending, p.lost
	p.pending, p.lost = nil, 0
	p.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintln(w, prefix+l)
	}
	if lost > 0 {
		fmt.Fprintf(w, "%s%d more events not printed: stderr was not being read\n", prefix, lost)
	}
}

// watch runs a headless command (record, serve) until ctx is done, calling
// each every 200 ms (to print what happened), and returns early with the
// recording's error when it fails.
func watch(ctx context.Context, ses *session.Session, each func()) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			each()
			if err := ses.RecordErr(); err != nil {
				return err
			}
		}
	}
}

// sayRecordingEnd says what went wrong with a recording, if anything: its
// error after errPrefix, what it dropped after dropPrefix (the file says
// so too, and loads). It reports whether anything did.
func sayRecordingEnd(stderr io.Writer, e session.Ended, errPrefix, dropPrefix string) bool {
	if e.Err != nil {
		say(stderr, errPrefix, e.Err)
	}
	if e.Drops != "" {
		say(stderr, dropPrefix, e.Drops)
	}
	return e.Err != nil || e.Drops != ""
}

// interrupted is the context of a command with no terminal of its own: done
// at Ctrl-C (SIGINT) or SIGTERM.
func interrupted() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// forceHint adds how to replace a file that a recording refused to
// truncate.
func forceHint(err error) string {
	var he *outfile.HoldsDataError
	if errors.As(err, &he) {
		return err.Error() + "; --force replaces it"
	}
	return err.Error()
}

// defaultFPS is --fps's default: how often Bubble Tea's renderer looks for
// a new frame, whether or not one came (the frames themselves come only
// when what is drawn changed, at most 4 a second but for keys). A key is on
// screen within 1/15 s; at 30 the renderer's wake-ups alone cost about 0.3%
// of a core (bench/cmd/tuiload).
const defaultFPS = 15
