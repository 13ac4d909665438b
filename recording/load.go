package recording

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Every time in a recording must lie within this window around the header's
// start. Real recordings span hours; the bound keeps a corrupt time from
// overflowing the store's and the chart's time arithmetic. Live, agents'
// times are kept within wire.MaxClockSkew of gputop's clock.
const (
	maxBefore = int64(wire.MaxClockSkew)
	maxAfter  = int64(100 * 24 * time.Hour)
	maxStart  = int64(1) << 62
)

// Info describes a loaded recording.
type Info struct {
	Header  wire.Recording
	Frames  int   // frames loaded, header not counted
	Skipped int   // frames skipped: unknown types (from a newer writer) and frames that do not belong in a recording
	Samples int64 // NVML device samples loaded
	Start   int64 // earliest time in the frames loaded (0 if none)
	End     int64 // latest time in the frames loaded
	Bytes   int64 // bytes consumed: the whole input, or up to the bad line
	Dropped Drops // what the recorder could not write: its dropped lines, summed
	// Warnings are about lines loaded with something left out (a row_edit
	// of a row the recording lacks), each naming its line: the first
	// maxWarnings of them; Warned counts them all.
	Warnings []string
	Warned   int
}

// FormatError is a recording line that could not be loaded. Everything
// before it is in the store.
type FormatError struct {
	File      string
	Offset    int64 // byte offset of the start of the bad line
	Line      int   // 1-based line number
	Msg       string
	Truncated bool // the last line was cut off (no newline): e.g. the recorder was killed
	Empty     bool // there was nothing at all to read
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: byte %d (line %d): %s", e.File, e.Offset, e.Line, e.Msg)
}

// Load reads a recording file into st. See LoadReader.
func Load(path string, st *store.Store) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("recording: %w", err)
	}
	defer f.Close()
	return LoadReader(path, f, st)
}

// LoadReader reads a recording from r into st, feeding every frame through
// ingest in file order. name appears in errors.
//
// A line that cannot be loaded (bad JSON, a missing field, an impossible
// value, a line over MaxLineBytes, a cut-off last line) ends the load
// with a *FormatError; the frames before it stay in st and Info describes
// them. Frame types this version does not know are skipped and counted. I/O
// errors from r are returned as they are.
func LoadReader(name string, r io.Reader, st *store.Store) (Info, error) {
	return LoadInto(name, r, ingest.New(st))
}

// LoadInto is LoadReader through in, whose Tap (a Writer: a recording
// written again in this version's format) sees what the store kept.
func LoadInto(name string, r io.Reader, in *ingest.Ingest) (Info, error) {
	l := &loader{st: in.Store(), in: in, dec: NewDecoder(name, r)}
	err := l.run()
	l.flushDevices()
	// the achieved NVML rate, which the live header showed, from the data
	for dev, r := range l.rates {
		if r.n > 1 && r.last > r.first {
			l.in.Rate(dev, float64(r.n-1)/(float64(r.last-r.first)/1e9))
		}
	}
	l.info.Header = l.dec.Header()
	l.info.Skipped = l.dec.Skipped
	l.info.Start, l.info.End = l.dec.Start, l.dec.End
	l.info.Bytes = l.dec.Offset()
	return l.info, err
}

// rate counts a device's NVML samples and their time span.
type rate struct {
	n           int64
	first, last int64
}

// loader applies a Decoder's frames to a store, recreating what the live
// store held: which devices were NVML's and which an agent's, an OOM's row.
type loader struct {
	st   *store.Store   // read: what the frames so far made
	in   *ingest.Ingest // st's way in
	dec  *Decoder
	info Info

	// device frames held back until the next frame: a recording holds the
	// devices a hello created for its agent right before the hello, and
	// replaying the hello recreates them with their agent-only source.
	devs      []wire.Device
	agentDevs map[int]bool // devices AgentHello made from held-back frames
	rates     map[int]*rate
	// the last frame was an oom: the store's OOM row that follows
	// it in an older recording is a duplicate of what AgentOOM recreates.
	oom struct {
		set bool
		pid int
		t   int64
	}
	rows rowIDs // the recording's row ids -> the store's (load_rows.go)
}

func (l *loader) run() error {
	for {
		f, err := l.dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := l.apply(f); err != nil {
			return err
		}
	}
}

// apply loads one decoded frame.
func (l *loader) apply(f wire.Frame) error {
	typ := f.FrameType()
	if typ == wire.TypeRecording {
		return nil
	}
	if typ != wire.TypeDevice && typ != wire.TypeHello {
		l.flushDevices()
	}
	oom := l.oom
	l.oom.set = false
	l.info.Frames++
	l.rows.recording(l.dec.Joined)
	switch v := f.(type) {
	case wire.Device:
		l.devs = append(l.devs, v)
	case wire.NVML:
		l.addBatch(v)
	case wire.Procs:
		l.nvmlSeen(v.Dev)
		l.in.Apply(0, v)
	case wire.DevError:
		l.nvmlSeen(v.Dev)
		l.in.Apply(0, v)
	case wire.Hello:
		l.hello(v)
	case wire.Row:
		if oom.set && v.IsOOMRowOf(oom.pid, oom.t) {
			l.info.Frames-- // AgentOOM already made this row
			return nil
		}
		l.rows.made(v.ID, l.in.Apply(v.PID, v), l.st)
	case wire.OOM:
		l.rows.made(v.Row, l.in.Apply(v.PID, v), l.st)
		l.oom.set, l.oom.pid, l.oom.t = true, v.PID, v.T
	case Dropped:
		l.info.Dropped.add(v.Drops)
	case wire.RowEdit:
		l.edit(v)
	case wire.Owned:
		l.in.Apply(v.FramePID(), v) // holders, bye, ended, held
	case wire.Samples:
		l.in.Apply(v.PID, v)
	case wire.Sample:
		l.in.Apply(v.PID, v)
	default:
		l.in.Apply(0, v) // host, and a frame type with no process and no loading of its own
	}
	return nil
}
