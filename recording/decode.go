// The streaming decoder: a recording read one frame at a time from any
// reader (a file, a pipe from a remote gputop), each line checked as a
// whole before it is handed on. The loader applies its frames to a store;
// package remote applies a live stream's.

package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Decoder reads a recording's frames in order. It reads no further ahead
// than the line it returns, so a live stream's frames come out as soon as
// their line is whole.
type Decoder struct {
	name   string
	br     *bufio.Reader
	long   []byte // a line longer than the bufio buffer
	off    int64  // start of the current line
	last   int64  // the length of the line of the frame Next returned last
	line   int    // current line number
	header bool
	hdr    wire.Recording
	batch  wire.NVML // reused by the batch fast path
	err    error     // sticky: once a line is bad, every later Next returns it
	pres   *presence // the presence struct pv is one of
	pv     reflect.Value

	// Skipped counts frames skipped: unknown types (from a newer writer)
	// and frames that do not belong in a recording.
	Skipped int
	// Start and End are the earliest and latest times in the frames
	// returned (0 before any).
	Start, End int64
	// Joined counts the headers after the first (recordings joined with
	// cat): the frames after one are another recording's.
	Joined int
}

// NewDecoder returns a decoder of the recording read from r; name appears
// in its errors (a file name, or the host a stream comes from).
func NewDecoder(name string, r io.Reader) *Decoder {
	return &Decoder{name: name, br: bufio.NewReaderSize(r, 64<<10)}
}

// Header is the recording's first header (zero until Next has returned it).
func (d *Decoder) Header() wire.Recording { return d.hdr }

// Offset is the number of bytes consumed: up to the end of the last line
// returned, or the start of a bad line.
func (d *Decoder) Offset() int64 { return d.off }

// LineBytes is the length of the line of the frame Next returned last,
// its newline included: what a source bounds a frame's size by.
func (d *Decoder) LineBytes() int64 { return d.last }

// Next returns the next frame: the header (wire.Recording) first, then
// device, batch (wire.NVML, wire.Samples), agent, row and Dropped frames,
// each checked whole (required fields, wire.Check, times near the header's
// start, device indices and pids in range). A wire.NVML returned shares
// its lists with the decoder until the next call. At the end of the input
// Next returns io.EOF; a line that cannot be loaded gives a *FormatError
// naming the byte offset and the line, and I/O errors are wrapped with the
// same place. After an error every call returns it again.
func (d *Decoder) Next() (wire.Frame, error) {
	if d.err != nil {
		return nil, d.err
	}
	f, err := d.next()
	if err != nil {
		d.err = err
	}
	return f, err
}

func (d *Decoder) next() (wire.Frame, error) {
	for {
		d.line++
		frag, err := d.br.ReadSlice('\n')
		line := frag
		if errors.Is(err, bufio.ErrBufferFull) {
			d.long = append(d.long[:0], frag...)
			// stop reading a line as soon as it is known to be too long
			for errors.Is(err, bufio.ErrBufferFull) && len(d.long) <= MaxLineBytes+1 {
				frag, err = d.br.ReadSlice('\n')
				d.long = append(d.long, frag...)
			}
			line = d.long
		}
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		body := line
		if complete {
			body = line[:len(line)-1]
		}
		if len(body) > MaxLineBytes {
			return nil, d.errf("line longer than %d bytes (recording.MaxLineBytes)", MaxLineBytes)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: byte %d (line %d): %w", d.name, d.off, d.line, err)
		}
		if len(line) == 0 { // end of input at a line boundary
			if !d.header {
				e := d.errf("empty file: not a gputop recording")
				e.Empty = d.off == 0
				return nil, e
			}
			return nil, io.EOF
		}
		f, ferr := d.frame(body)
		if ferr != nil {
			// a cut-off object is never valid JSON; a whole object that
			// only lacks its newline is an ordinary bad line
			if !complete && !json.Valid(body) {
				ferr.Truncated = true
				ferr.Msg = fmt.Sprintf("the last line is cut off after %d bytes (no newline): the recording ends mid-frame, e.g. the recorder was killed", len(body))
			}
			return nil, ferr
		}
		d.off += int64(len(line))
		if f != nil {
			d.last = int64(len(line))
			return f, nil
		}
		if !complete {
			return nil, io.EOF // a whole line, only the final newline is missing
		}
	}
}

func (d *Decoder) errf(format string, args ...any) *FormatError {
	return &FormatError{File: d.name, Offset: d.off, Line: d.line, Msg: fmt.Sprintf(format, args...)}
}

// Line is the line number of the frame Next returned last.
func (d *Decoder) Line() int { return d.line }

// frame decodes one line. It returns nil, nil for a line that holds no
// frame to hand on: blank, a repeated header, a skipped type.
func (d *Decoder) frame(body []byte) (wire.Frame, *FormatError) {
	if len(bytes.TrimSpace(body)) == 0 {
		if !d.header {
			return nil, d.errf("not a gputop recording: the first line is empty")
		}
		return nil, nil // blank lines are harmless
	}
	if d.header && bytes.HasPrefix(body, batchPrefix) && parseBatch(body, &d.batch) {
		// the Writer's own batch lines, most of a recording, skip
		// encoding/json; anything else falls through to it
		if err := d.checkBatch(&d.batch); err != nil {
			return nil, d.errf("nvml frame: %v", err)
		}
		return d.batch, nil
	}
	pr := currentPresence()
	if d.pres != pr {
		d.pres, d.pv = pr, reflect.New(pr.typ)
	}
	pv := d.pv
	pv.Elem().SetZero()
	if err := decodeJSON(body, pv.Interface()); err != nil {
		if !d.header {
			return nil, d.errf("not a gputop recording: %v", err)
		}
		return nil, d.errf("%v", err)
	}
	p := pv.Elem()
	tp := p.Field(0).Interface().(*string)
	if tp == nil {
		if !d.header {
			return nil, d.errf(`not a gputop recording: the first line has no "type"`)
		}
		return nil, d.errf(`frame has no "type" field`)
	}
	typ := *tp
	if !d.header && typ != wire.TypeRecording {
		return nil, d.errf(`not a gputop recording: the first line is a %q frame, want {"type":"recording",...}`, typ)
	}
	spec, known := wire.Lookup(typ)
	if !known || !spec.Recorded {
		// a newer writer's frame, or a socket frame that has no place in a
		// recording (mark, snap, reply, request)
		d.Skipped++
		return nil, nil
	}
	for _, f := range spec.Required() {
		raw := p.Field(pr.index[f.Name]).Bytes()
		if raw == nil {
			return nil, d.errf("%s frame without the required field %q", typ, f.Name)
		}
		if !f.Nullable && string(raw) == "null" {
			return nil, d.errf("%s frame: field %q is null", typ, f.Name)
		}
	}
	if typ == wire.TypeRecording {
		return d.headerFrame(body)
	}
	f, err := d.decode(spec, body)
	if err != nil {
		return nil, d.errf("%s frame: %v", typ, err)
	}
	return f, nil
}

// decode decodes a frame of a known type other than the header, checks it
// as the agent socket does (wire.Check, so a recording holds nothing a live
// agent could not send), then as a recording's (loadChecks).
func (d *Decoder) decode(spec wire.Spec, body []byte) (wire.Frame, error) {
	p := spec.New()
	if err := decodeJSON(body, p); err != nil {
		return nil, err
	}
	f := spec.Value(p)
	if err := wire.Check(f); err != nil {
		return nil, err
	}
	if c := loadChecks[spec.Type]; c != nil {
		return c(d, f)
	}
	return f, nil
}

// loadChecks are what a recording asks of a frame type beyond wire.Check:
// times near the header's start, device indices and pids in range. A type
// without an entry has none.
var loadChecks = map[string]func(d *Decoder, f wire.Frame) (wire.Frame, error){
	wire.TypeDevice: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		return f, d.checkDev(f.(wire.Device).Index)
	},
	wire.TypeNVML: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		v := f.(wire.NVML)
		return v, d.checkBatch(&v)
	},
	wire.TypeSamples: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		v := f.(wire.Samples)
		return v, d.checkSamples(&v)
	},
	wire.TypeProcs:    devTime(func(v wire.Procs) (int, int64) { return v.Dev, v.T }),
	wire.TypeDevError: devTime(func(v wire.DevError) (int, int64) { return v.Dev, v.T }),
	wire.TypeRowEdit:  devTime(func(v wire.RowEdit) (int, int64) { return v.Dev, v.T }),
	wire.TypeRow: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		v := f.(wire.Row)
		if d.hdr.V < 3 {
			// before version 3 rows did not say; the label did
			v.End = wire.IsEndLabel(v.Label)
		}
		return v, d.check(v.Dev, v.T)
	},
	wire.TypeHello:     agentTime(func(v wire.Hello) (int, int64) { return v.PID, v.T }),
	wire.TypeSample:    agentTime(func(v wire.Sample) (int, int64) { return v.PID, v.T }),
	wire.TypeOOM:       agentTime(func(v wire.OOM) (int, int64) { return v.PID, v.T }),
	wire.TypeHolders:   agentTime(func(v wire.Holders) (int, int64) { return v.PID, v.T }),
	wire.TypeLayout:    agentTime(func(v wire.LayoutReading) (int, int64) { return v.PID, v.T }),
	wire.TypeFramework: agentTime(func(v wire.FrameworkReading) (int, int64) { return v.PID, v.T }),
	wire.TypeBye:       agentTime(func(v wire.Bye) (int, int64) { return v.PID, v.T }),
	wire.TypeEnded:     agentTime(func(v wire.Ended) (int, int64) { return v.PID, v.T }),
	wire.TypeRowHeld: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		v := f.(wire.RowHeld)
		if err := d.check(v.Dev, v.T); err != nil {
			return nil, err
		}
		if v.PID <= 0 {
			return nil, fmt.Errorf("pid %d is not a process id", v.PID)
		}
		return v, nil
	},
	wire.TypeHost: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		v := f.(wire.Host)
		if v.ID < 1 || v.ID > store.MaxHosts {
			return nil, fmt.Errorf("host id %d out of range 1..%d", v.ID, store.MaxHosts)
		}
		return v, d.checkTime(v.T)
	},
	TypeDropped: func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		return f, d.checkTime(f.(Dropped).T)
	},
}

// devTime checks a frame's device and time (Decoder.check).
func devTime[T wire.Frame](at func(T) (int, int64)) func(*Decoder, wire.Frame) (wire.Frame, error) {
	return func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		dev, t := at(f.(T))
		return f, d.check(dev, t)
	}
}

// agentTime checks an agent frame's pid and time (Decoder.checkAgent).
func agentTime[T wire.Frame](at func(T) (int, int64)) func(*Decoder, wire.Frame) (wire.Frame, error) {
	return func(d *Decoder, f wire.Frame) (wire.Frame, error) {
		pid, t := at(f.(T))
		return f, d.checkAgent(pid, t)
	}
}

func (d *Decoder) headerFrame(body []byte) (wire.Frame, *FormatError) {
	var h wire.Recording
	if err := decodeJSON(body, &h); err != nil {
		return nil, d.errf("recording header: %v", err)
	}
	if h.V < 1 || h.V > FormatVersion {
		return nil, d.errf("recording format version %d is not supported (this gputop reads versions 1 to %d)", h.V, FormatVersion)
	}
	if h.Start < 0 || h.Start > maxStart {
		return nil, d.errf("recording header: start %d is not a time", h.Start)
	}
	if d.header {
		d.Joined++
		return nil, nil // a second header (recordings joined with cat) only has to agree on v
	}
	d.header, d.hdr = true, h
	return h, nil
}
