// The session's recording: the ingest's Tap from before the sources start,
// its output opened once they have started.

package session

import (
	"context"
	"os"
	"time"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/wire"
)

// Record is where a session's recording goes and what its header says.
type Record struct {
	// Path is a file, FIFO or device, written as package outfile writes
	// a stream: checked before anything starts (a file that holds data is
	// refused unless Force), opened once the sources have started. A FIFO
	// waits there for its reader; Waiting (when not nil) is told first.
	Path    string
	Force   bool
	Waiting func()
	// Out, when Path is "", is written as it is and named "standard
	// output" (serve --stdio).
	Out *os.File
	// Writer is added to Options.Tool in the header, to say what wrote it
	// (" (TUI)"); Comment is the header's free text.
	Writer, Comment string
}

// OutputError is a recording's output that could not be checked, opened
// or started. The session did not start.
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// newRecording checks the output, makes the writer and makes it the
// ingest's Tap, so the recording misses nothing of what the sources bring.
// Its header says this host, now, what wrote it, the sampling rate and the
// remote hosts shown.
func (s *Session) newRecording(opt Options) error {
	r := opt.Record
	if r.Path != "" {
		if _, err := outfile.CheckStream(r.Path, r.Force); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	s.rec = recording.NewWriter(wire.Recording{
		Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Host: host,
		Tool: opt.Tool + r.Writer, RateHz: int(opt.Rate), Comment: r.Comment, Hosts: opt.Hosts,
	})
	s.in.SetTap(s.rec)
	return nil
}

// openOutput opens the recording's output and starts writing what the Tap
// has queued since the sources started.
func (s *Session) openOutput(ctx context.Context, r *Record) error {
	if s.rec == nil {
		return nil
	}
	if r.Path == "" {
		return s.rec.Start(r.Out, "standard output")
	}
	f, err := outfile.OpenStream(ctx, r.Path, r.Force, r.Waiting)
	if err != nil {
		return err
	}
	return s.rec.Start(f, r.Path)
}

// RecordErr is the recording's first write error (disk full, a reader
// gone), nil while it writes or when there is no recording.
func (s *Session) RecordErr() error {
	if s.rec == nil {
		return nil
	}
	return s.rec.Err()
}

// RecordStats are the recording's counters so far (bytes, drops); zero
// without a recording.
func (s *Session) RecordStats() recording.Stats {
	if s.rec == nil {
		return recording.Stats{}
	}
	return s.rec.Stats()
}
