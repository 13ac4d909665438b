// The live TUI's --record FILE: what gputop record would write, written
// while the TUI runs, so what the user does there (snapshots, renamed and
// deleted rows) is in the recording.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
)

// tuiRecorder writes the store's frames to path; nil records nothing.
type tuiRecorder struct {
	path string
	w    *recording.Writer
}

// newTUIRecorder checks path as record -o does (a file that holds data is
// refused: the TUI has no --force) and becomes in's Tap, before the
// sources start, so the recording misses nothing; it opens path only once
// they have started (open).
func newTUIRecorder(path string, rate float64, in *ingest.Ingest) (*tuiRecorder, error) {
	if path == "" {
		return nil, nil
	}
	t, err := outfile.CheckStream(path, false)
	if err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
		err = errors.New("the TUI draws on standard output, so the recording cannot go there; give a file name (or use gputop record -o -)")
	}
	var he *outfile.HoldsDataError
	if errors.As(err, &he) {
		err = fmt.Errorf("%w; give another name (gputop record --force replaces a recording)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--record %s: %w", path, err)
	}
	w := newRecordingWriter(rate, " (TUI)", "", nil)
	in.SetTap(w)
	return &tuiRecorder{path: path, w: w}, nil
}

// open opens the file and starts writing (a FIFO: once it has a reader).
func (r *tuiRecorder) open(ctx context.Context, stderr io.Writer) error {
	if r == nil {
		return nil
	}
	f, err := outfile.OpenStream(ctx, r.path, false, func() {
		say(stderr, fmt.Sprintf("gputop: --record %s is a FIFO: waiting for a reader", r.path))
	})
	if err == nil {
		err = r.w.Start(f, r.path)
	}
	if err != nil {
		r.w.Close()
		return fmt.Errorf("--record %s: %w", r.path, err)
	}
	return nil
}

// close ends the recording and says what went wrong, if anything: an
// error or drops (the file then says so too, and loads).
func (r *tuiRecorder) close(stderr io.Writer) error {
	if r == nil {
		return nil
	}
	err := r.w.Close()
	if err != nil {
		say(stderr, fmt.Sprintf("gputop: --record %s: %v", r.path, err))
	}
	if d := r.w.DropSummary(); d != "" {
		say(stderr, fmt.Sprintf("gputop: --record %s: %s", r.path, d))
		if err == nil {
			err = errors.New("recording incomplete")
		}
	}
	return err
}
