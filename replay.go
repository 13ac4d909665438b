// A recording behind the TUI: the demo's, or --replay's loading in the
// background.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gputop/gputop/demo"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/ui"
)

// openDemo loads the recording embedded in the binary for the TUI (--demo).
func openDemo(log *logbook.Book, opt *ui.Options) tuiSource {
	in := ingest.New(store.New(logTo(replayOptions(), log)))
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
	opt.OpenAt, _ = present.StoryMoment(in.Store())
	return tuiSource{in: in}
}

// openReplay starts loading path for the TUI (--replay).
func openReplay(ctx context.Context, path string, log *logbook.Book, opt *ui.Options) (tuiSource, error) {
	in := ingest.New(store.New(logTo(replayOptions(), log)))
	load, err := startReplay(ctx, path, in, log)
	if err != nil {
		return tuiSource{}, err
	}
	opt.Title = path
	opt.Replay = true
	return tuiSource{in: in, load: load}, nil
}

// replayLoad is a recording loading in the background for --replay, so
// that the TUI shows how far it got and quits at once when asked: a
// gigabyte takes seconds.
type replayLoad struct {
	path     string
	progress recording.Progress
	done     chan struct{}
	info     recording.Info // set once done is closed
	err      error
}

// startReplay starts loading path through in and returns once the load has
// loaded something or has ended. A file with nothing loadable in it (not
// a recording, missing, its first frame corrupt) is an error then, before
// any screen is drawn.
func startReplay(ctx context.Context, path string, in *ingest.Ingest, log *logbook.Book) (*replayLoad, error) {
	st := in.Store()
	r := &replayLoad{path: path, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.info, r.err = recording.LoadContext(ctx, path, in, &r.progress)
		if r.info.Dropped.Any() {
			log.Add(droppedNote(r.info.Dropped))
		}
		for _, w := range loadWarnings(r.info) {
			log.Add(w)
		}
	}()
	// the store's generation moves with the first frame ingested
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for st.Gen() == 0 {
		select {
		case <-r.done:
			var fe *recording.FormatError
			switch {
			case r.err != nil && r.info.Frames == 0 && errors.As(r.err, &fe):
				return nil, fmt.Errorf("%w; nothing in it can be replayed", r.err)
			case r.err != nil && r.info.Frames == 0:
				return nil, r.err
			}
			return r, nil
		case <-tick.C:
		}
	}
	return r, nil
}

// ui describes the load for ui.NewLoading.
func (r *replayLoad) ui() ui.Load {
	return ui.Load{Name: r.path, Progress: r.progress.Bytes, Done: r.done, Status: func() string {
		if r.err != nil {
			return r.err.Error() // a corrupt or truncated file: what was read before it is shown
		}
		return ""
	}}
}

// complete reports whether the load has read the whole file (or up to a
// bad line), rather than been stopped.
func (r *replayLoad) complete() bool {
	select {
	case <-r.done:
		return !errors.Is(r.err, context.Canceled)
	default:
		return false
	}
}
