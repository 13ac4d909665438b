package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
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
}

// FormatError is a recording line that could not be loaded. Everything
// before it is in the store.
type FormatError struct {
	File      string
	Offset    int64 // byte offset of the start of the bad line
	Line      int   // 1-based line number
	Msg       string
	Truncated bool // the last line was cut off (no newline): e.g. the recorder was killed
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
// the store's ingest methods in file order. name appears in errors.
//
// A line that cannot be loaded (bad JSON, a missing field, an impossible
// value, a line over MaxLineBytes, a cut-off last line) ends the load
// with a *FormatError; the frames before it stay in st and Info describes
// them. Frame types this version does not know are skipped and counted. I/O
// errors from r are returned as they are.
func LoadReader(name string, r io.Reader, st *store.Store) (Info, error) {
	l := &loader{name: name, st: st}
	err := l.run(bufio.NewReaderSize(r, 64<<10))
	l.flushDevices()
	// the achieved NVML rate, which the live header showed, from the data
	for dev, r := range l.rates {
		if r.n > 1 && r.last > r.first {
			l.st.SetRate(dev, float64(r.n-1)/(float64(r.last-r.first)/1e9))
		}
	}
	l.info.Bytes = l.off
	return l.info, err
}

// rate counts a device's NVML samples and their time span.
type rate struct {
	n           int64
	first, last int64
}

type loader struct {
	name   string
	st     *store.Store
	info   Info
	off    int64 // start of the current line
	line   int   // current line number
	header bool

	// device frames held back until the next frame: store.AgentHello emits
	// the devices it creates for an agent right before the hello, and
	// replaying the hello recreates them with their agent-only source.
	devs      []wire.Device
	agentDevs map[int]bool // devices AgentHello made from held-back frames
	batch     wire.NVML    // reused by the batch fast path
	rates     map[int]*rate
	// the last frame was an oom: the store's OOM snapshot row that follows
	// it in a raw tap stream is a duplicate of what AgentOOM recreates.
	oom struct {
		set bool
		pid int
		t   int64
	}
}

func (l *loader) errf(format string, args ...any) *FormatError {
	return &FormatError{File: l.name, Offset: l.off, Line: l.line, Msg: fmt.Sprintf(format, args...)}
}

func (l *loader) run(br *bufio.Reader) error {
	var long []byte // a line longer than the bufio buffer
	for {
		l.line++
		frag, err := br.ReadSlice('\n')
		line := frag
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], frag...)
			// stop reading a line as soon as it is known to be too long
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= MaxLineBytes+1 {
				frag, err = br.ReadSlice('\n')
				long = append(long, frag...)
			}
			line = long
		}
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		body := line
		if complete {
			body = line[:len(line)-1]
		}
		if len(body) > MaxLineBytes {
			return l.errf("line longer than %d bytes (recording.MaxLineBytes)", MaxLineBytes)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: byte %d (line %d): %w", l.name, l.off, l.line, err)
		}
		if len(line) == 0 { // end of input at a line boundary
			if !l.header {
				return l.errf("empty file: not a gputop recording")
			}
			return nil
		}
		if ferr := l.frame(body); ferr != nil {
			// a cut-off object is never valid JSON; a whole object that
			// only lacks its newline is an ordinary bad line
			if !complete && !json.Valid(body) {
				ferr.Truncated = true
				ferr.Msg = fmt.Sprintf("the last line is cut off after %d bytes (no newline): the recording ends mid-frame, e.g. the recorder was killed", len(body))
			}
			return ferr
		}
		l.off += int64(len(line))
		if !complete {
			return nil // a whole frame, only the final newline is missing
		}
	}
}

// frame loads one line. It returns nil after loading or skipping it.
func (l *loader) frame(body []byte) *FormatError {
	if len(bytes.TrimSpace(body)) == 0 {
		if !l.header {
			return l.errf("not a gputop recording: the first line is empty")
		}
		return nil // blank lines are harmless
	}
	if l.header && bytes.HasPrefix(body, batchPrefix) && parseBatch(body, &l.batch) {
		// the Writer's own batch lines, most of a recording, skip
		// encoding/json; anything else falls through to it
		l.flushDevices()
		l.oom.set = false
		if err := l.addBatch(&l.batch); err != nil {
			return l.errf("nvml frame: %v", err)
		}
		l.info.Frames++
		return nil
	}
	var p presence
	if err := decodeJSON(body, &p); err != nil {
		if !l.header {
			return l.errf("not a gputop recording: %v", err)
		}
		return l.errf("%v", err)
	}
	if p.Type == nil {
		if !l.header {
			return l.errf(`not a gputop recording: the first line has no "type"`)
		}
		return l.errf(`frame has no "type" field`)
	}
	typ := *p.Type
	if !l.header && typ != wire.TypeRecording {
		return l.errf(`not a gputop recording: the first line is a %q frame, want {"type":"recording",...}`, typ)
	}
	req, known := required[typ]
	if !known {
		// a newer writer's frame, or a socket frame that has no place in a
		// recording (mark, snap, reply, request)
		l.info.Skipped++
		return nil
	}
	for _, f := range req {
		raw := f.get(&p)
		if raw == nil {
			return l.errf("%s frame without the required field %q", typ, f.name)
		}
		if !f.nullable && string(raw) == "null" {
			return l.errf("%s frame: field %q is null", typ, f.name)
		}
	}
	if typ == wire.TypeRecording {
		return l.headerFrame(body)
	}
	if typ != wire.TypeDevice && typ != wire.TypeHello {
		l.flushDevices()
	}
	oom := l.oom
	l.oom.set = false
	var err error
	switch typ {
	case wire.TypeDevice:
		err = l.device(body)
	case wire.TypeNVML:
		err = l.nvml(body)
	case wire.TypeProcs:
		var f wire.Procs
		if err = decodeJSON(body, &f); err == nil {
			if err = l.check(f.Dev, f.T); err == nil {
				l.nvmlSeen(f.Dev)
				ingest.Apply(l.st, 0, f)
			}
		}
	case wire.TypeDevError:
		var f wire.DevError
		if err = decodeJSON(body, &f); err == nil {
			if err = l.check(f.Dev, f.T); err == nil {
				l.nvmlSeen(f.Dev)
				ingest.Apply(l.st, 0, f)
			}
		}
	case wire.TypeHello:
		var f wire.Hello
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				l.hello(f)
			}
		}
	case wire.TypeSample:
		var f wire.Sample
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				ingest.Apply(l.st, f.PID, f)
			}
		}
	case wire.TypeSamples:
		var f wire.Samples
		if err = decodeJSON(body, &f); err == nil {
			err = l.samples(&f)
		}
	case wire.TypeSnapshot:
		var f wire.Snapshot
		if err = decodeJSON(body, &f); err == nil {
			if err = l.check(f.Dev, f.T); err == nil {
				if oom.set && f.IsOOMRowOf(oom.pid, oom.t) {
					return nil // AgentOOM already made this row
				}
				if l.info.Header.V < 3 {
					// before version 3 rows did not say; the label did
					f.End = wire.IsEndLabel(f.Label)
				}
				ingest.Apply(l.st, f.PID, f)
			}
		}
	case wire.TypeOOM:
		var f wire.OOM
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				ingest.Apply(l.st, f.PID, f)
				l.oom.set, l.oom.pid, l.oom.t = true, f.PID, f.T
			}
		}
	case wire.TypeHolders:
		var f wire.Holders
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				ingest.Apply(l.st, f.PID, f)
			}
		}
	case wire.TypeBye:
		var f wire.Bye
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				ingest.Apply(l.st, f.PID, f)
			}
		}
	case wire.TypeRowHeld:
		var f wire.RowHeld
		if err = decodeChecked(body, &f); err == nil {
			if err = l.check(f.Dev, f.T); err == nil {
				if f.PID <= 0 {
					err = fmt.Errorf("pid %d is not a process id", f.PID)
				} else {
					ingest.Apply(l.st, f.PID, f)
				}
			}
		}
	case wire.TypeRowEdit:
		var f wire.RowEdit
		if err = decodeChecked(body, &f); err == nil {
			if err = l.check(f.Dev, f.T); err == nil && ingest.Apply(l.st, f.PID, f) == nil {
				err = fmt.Errorf("row_edit names no snapshot row: none labelled %q of pid %d on device %d at t %d", wire.Clip(f.Label, 60), f.PID, f.Dev, f.T)
			}
		}
	case wire.TypeEnded:
		var f wire.Ended
		if err = decodeChecked(body, &f); err == nil {
			if err = l.checkAgent(f.PID, f.T); err == nil {
				ingest.Apply(l.st, f.PID, f)
			}
		}
	case TypeDropped:
		var f Dropped
		if err = decodeJSON(body, &f); err == nil {
			if err = l.checkTime(f.T); err == nil {
				l.info.Dropped.add(f.Drops)
			}
		}
	}
	if err != nil {
		return l.errf("%s frame: %v", typ, err)
	}
	l.info.Frames++
	return nil
}

func (l *loader) headerFrame(body []byte) *FormatError {
	var h wire.Recording
	if err := decodeJSON(body, &h); err != nil {
		return l.errf("recording header: %v", err)
	}
	if h.V < 1 || h.V > FormatVersion {
		return l.errf("recording format version %d is not supported (this gputop reads versions 1 to %d)", h.V, FormatVersion)
	}
	if h.Start < 0 || h.Start > maxStart {
		return l.errf("recording header: start %d is not a time", h.Start)
	}
	if !l.header {
		l.header = true
		l.info.Header = h
	}
	// a second header (recordings joined with cat) only has to agree on v
	return nil
}
