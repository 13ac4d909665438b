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

// presence records which fields a line has, so a required field that is
// missing is an error instead of a silent zero. RawMessage only scans.
type presence struct {
	Type      *string         `json:"type"`
	V         json.RawMessage `json:"v"`
	Start     json.RawMessage `json:"start"`
	Index     json.RawMessage `json:"index"`
	UUID      json.RawMessage `json:"uuid"`
	Name      json.RawMessage `json:"name"`
	Total     json.RawMessage `json:"total"`
	Dev       json.RawMessage `json:"dev"`
	T0        json.RawMessage `json:"t0"`
	DT        json.RawMessage `json:"dt"`
	Used      json.RawMessage `json:"used"`
	PID       json.RawMessage `json:"pid"`
	T         json.RawMessage `json:"t"`
	Procs     json.RawMessage `json:"procs"`
	Error     json.RawMessage `json:"error"`
	Devices   json.RawMessage `json:"devices"`
	Allocated json.RawMessage `json:"allocated"`
	Reserved  json.RawMessage `json:"reserved"`
	Peak      json.RawMessage `json:"peak"`
	Label     json.RawMessage `json:"label"`
	Source    json.RawMessage `json:"source"`
	Skipped   json.RawMessage `json:"skipped"`
	Groups    json.RawMessage `json:"groups"`
	Held      json.RawMessage `json:"held"`
}

type field struct {
	name     string
	get      func(*presence) json.RawMessage
	nullable bool // a list that may be null (encoding/json writes nil slices so)
}

var (
	fV         = field{"v", func(p *presence) json.RawMessage { return p.V }, false}
	fStart     = field{"start", func(p *presence) json.RawMessage { return p.Start }, false}
	fIndex     = field{"index", func(p *presence) json.RawMessage { return p.Index }, false}
	fUUID      = field{"uuid", func(p *presence) json.RawMessage { return p.UUID }, false}
	fName      = field{"name", func(p *presence) json.RawMessage { return p.Name }, false}
	fTotal     = field{"total", func(p *presence) json.RawMessage { return p.Total }, false}
	fDev       = field{"dev", func(p *presence) json.RawMessage { return p.Dev }, false}
	fT0        = field{"t0", func(p *presence) json.RawMessage { return p.T0 }, false}
	fDT        = field{"dt", func(p *presence) json.RawMessage { return p.DT }, false}
	fUsed      = field{"used", func(p *presence) json.RawMessage { return p.Used }, false}
	fPID       = field{"pid", func(p *presence) json.RawMessage { return p.PID }, false}
	fT         = field{"t", func(p *presence) json.RawMessage { return p.T }, false}
	fProcs     = field{"procs", func(p *presence) json.RawMessage { return p.Procs }, true}
	fError     = field{"error", func(p *presence) json.RawMessage { return p.Error }, false}
	fDevices   = field{"devices", func(p *presence) json.RawMessage { return p.Devices }, true}
	fAllocated = field{"allocated", func(p *presence) json.RawMessage { return p.Allocated }, false}
	fReserved  = field{"reserved", func(p *presence) json.RawMessage { return p.Reserved }, false}
	fPeak      = field{"peak", func(p *presence) json.RawMessage { return p.Peak }, false}
	fLabel     = field{"label", func(p *presence) json.RawMessage { return p.Label }, false}
	fSource    = field{"source", func(p *presence) json.RawMessage { return p.Source }, false}
	fSkipped   = field{"skipped", func(p *presence) json.RawMessage { return p.Skipped }, false}
	fGroups    = field{"groups", func(p *presence) json.RawMessage { return p.Groups }, true}
	fHeld      = field{"held", func(p *presence) json.RawMessage { return p.Held }, false}
)

// required lists, per frame type, the fields that must be present: those the
// wire types never omit, plus pid on agent frames (gputop fills it in).
var required = map[string][]field{
	wire.TypeRecording: {fV, fStart},
	wire.TypeDevice:    {fIndex, fUUID, fName, fTotal},
	wire.TypeNVML:      {fDev, fT0, fDT, fUsed},
	wire.TypeProcs:     {fT, fDev, fProcs},
	wire.TypeDevError:  {fT, fDev, fError},
	wire.TypeHello:     {fV, fPID, fT, fDevices},
	wire.TypeSample:    {fPID, fT, fDev, fAllocated, fReserved, fPeak},
	wire.TypeSamples:   {fPID, fDev, fT0, fDT, fAllocated, fReserved, fPeak},
	wire.TypeSnapshot:  {fT, fLabel, fDev, fSource},
	wire.TypeOOM:       {fPID, fT, fDev, fAllocated, fReserved, fPeak},
	wire.TypeHolders:   {fPID, fT, fDev, fSkipped, fGroups},
	wire.TypeBye:       {fPID, fT},
	wire.TypeEnded:     {fPID, fT},
	wire.TypeRowHeld:   {fPID, fT, fDev, fHeld},
	TypeDropped:        {fT},
}

// decodeChecked unmarshals a frame and checks it as the agent socket does
// (wire.Check), so a recording holds nothing a live agent could not send.
func decodeChecked[T wire.Frame](b []byte, f *T) error {
	if err := decodeJSON(b, f); err != nil {
		return err
	}
	return wire.Check(*f)
}

// decodeJSON unmarshals and words errors for people.
func decodeJSON(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at column %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Errorf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("want a JSON object, got JSON %s", te.Value)
	}
	return fmt.Errorf("invalid JSON: %v", err)
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

// samples checks a whole agent sample batch, then ingests its samples one
// by one, as they came from the agent; a bad batch adds none.
func (l *loader) samples(f *wire.Samples) error {
	if f.PID <= 0 {
		return fmt.Errorf("pid %d is not a process id", f.PID)
	}
	n := len(f.DT)
	if n == 0 {
		return errors.New("empty batch (dt has no samples)")
	}
	lists := f.Lists()
	for i, p := range lists {
		if len(*p) != n && (i < 3 || len(*p) != 0) {
			return fmt.Errorf("dt has %d samples but %s has %d", n, sampleLists[i], len(*p))
		}
	}
	if err := l.checkSteps(f.T0, f.DT); err != nil {
		return err
	}
	t := f.T0
	var c [8]uint64
	for i, d := range f.DT {
		t += d
		for j, p := range lists {
			if len(*p) != 0 {
				c[j] += uint64((*p)[i])
			}
		}
		smp := wire.Sample{Type: wire.TypeSample, T: t, Dev: f.Dev}
		smp.SetCounters(c)
		l.span(t)
		// a batch is the recording's encoding of sample frames: each goes in
		// as one (straight to the store, as ingest.Apply would: a batch holds
		// thousands, and handing each over as a wire.Frame would allocate)
		l.st.AgentSample(f.PID, smp)
	}
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

// checkTime keeps times near the header's start (see maxBefore, maxAfter)
// and notes the span loaded.
func (l *loader) checkTime(t int64) error {
	s := l.info.Header.Start
	if t < s-maxBefore || t > s+maxAfter {
		return fmt.Errorf("time %d is not within %v before to %v after the recording's start %d",
			t, time.Duration(maxBefore), time.Duration(maxAfter), s)
	}
	return nil
}

func (l *loader) span(t int64) {
	if l.info.Start == 0 || t < l.info.Start {
		l.info.Start = t
	}
	if t > l.info.End {
		l.info.End = t
	}
}

func (l *loader) checkDev(dev int) error {
	if dev < 0 || dev >= store.MaxDevices {
		return fmt.Errorf("device index %d out of range 0..%d", dev, store.MaxDevices-1)
	}
	return nil
}

func (l *loader) check(dev int, t int64) error {
	if err := l.checkDev(dev); err != nil {
		return err
	}
	if err := l.checkTime(t); err != nil {
		return err
	}
	l.span(t)
	return nil
}

func (l *loader) checkAgent(pid int, t int64) error {
	if pid <= 0 {
		return fmt.Errorf("pid %d is not a process id", pid)
	}
	if err := l.checkTime(t); err != nil {
		return err
	}
	l.span(t)
	return nil
}

func (l *loader) device(body []byte) error {
	var f wire.Device
	if err := decodeJSON(body, &f); err != nil {
		return err
	}
	if err := l.checkDev(f.Index); err != nil {
		return err
	}
	l.devs = append(l.devs, f)
	return nil
}

// flushDevices adds the held-back device frames as NVML devices.
func (l *loader) flushDevices() {
	for _, d := range l.devs {
		l.st.SetDevice(store.Device{Index: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total, Source: "nvml"})
	}
	l.devs = l.devs[:0]
}

// hello replays an agent's hello. store.AgentHello writes the devices it
// creates for an agent (devices NVML does not see) right before the hello,
// so the held-back device frames are NVML devices followed by those. The
// split is the first one after which the rest is exactly what AgentHello is
// about to create; AgentHello then recreates them with their agent-only
// source. An NVML device that the hello lists identically can be taken for
// an agent device here; NVML data for it later puts that right (nvmlSeen).
func (l *loader) hello(h wire.Hello) {
	if len(l.devs) > 0 {
		have := l.st.Devices()
		k := len(l.devs)
		for split := 0; split < len(l.devs); split++ {
			if l.agentCreates(h, have, l.devs[:split], l.devs[split:]) {
				k = split
				break
			}
		}
		rest := append([]wire.Device(nil), l.devs[k:]...)
		l.devs = l.devs[:k]
		l.flushDevices()
		for _, d := range rest {
			if l.agentDevs == nil {
				l.agentDevs = map[int]bool{}
			}
			l.agentDevs[d.Index] = true
		}
	}
	ingest.Apply(l.st, h.PID, h)
}

// agentCreates reports whether AgentHello(h), after the NVML devices have
// and nvml, would create exactly the devices rest.
func (l *loader) agentCreates(h wire.Hello, have []store.Device, nvml, rest []wire.Device) bool {
	known := map[string]bool{}
	next := len(have)
	for _, d := range have {
		known[d.UUID] = true
	}
	for _, d := range nvml {
		known[d.UUID] = true
		next = max(next, d.Index+1)
	}
	i := 0
	for _, ad := range h.Devices {
		if ad.UUID != "" && known[ad.UUID] {
			continue
		}
		known[ad.UUID] = true
		if next+i >= store.MaxDevices {
			continue // AgentHello adds no device past the limit
		}
		want := wire.Device{Type: wire.TypeDevice, Index: next + i, UUID: ad.UUID, Name: ad.Name, Total: ad.Total}
		if i >= len(rest) || rest[i] != want {
			return false
		}
		i++
	}
	return i == len(rest)
}

// nvmlSeen marks a device as an NVML device once NVML data for it appears.
func (l *loader) nvmlSeen(dev int) {
	if !l.agentDevs[dev] {
		return
	}
	delete(l.agentDevs, dev)
	if ds := l.st.Devices(); dev < len(ds) && ds[dev].Source != "nvml" {
		d := ds[dev]
		d.Source = "nvml"
		l.st.SetDevice(d)
	}
}

// nvml decodes a batch line with encoding/json.
func (l *loader) nvml(body []byte) error {
	var f wire.NVML
	if err := decodeJSON(body, &f); err != nil {
		return err
	}
	return l.addBatch(&f)
}

// checkSteps checks a batch's first time and each sample's time.
func (l *loader) checkSteps(t0 int64, dt []int64) error {
	if err := l.checkTime(t0); err != nil {
		return err
	}
	t := t0
	for i, d := range dt {
		// bound each step first so t+d cannot overflow
		if d < -maxAfter-maxBefore || d > maxAfter+maxBefore {
			return fmt.Errorf("dt[%d] = %d is not a plausible step", i, d)
		}
		t += d
		if err := l.checkTime(t); err != nil {
			return fmt.Errorf("sample %d: %v", i, err)
		}
	}
	return nil
}

// addBatch checks a whole batch, then adds its samples; a bad batch adds
// none.
func (l *loader) addBatch(f *wire.NVML) error {
	if err := l.checkDev(f.Dev); err != nil {
		return err
	}
	n := len(f.DT)
	switch {
	case n == 0:
		return errors.New("empty batch (dt has no samples)")
	case len(f.Used) != n:
		return fmt.Errorf("dt has %d samples but used has %d", n, len(f.Used))
	case len(f.Reserved) != 0 && len(f.Reserved) != n:
		return fmt.Errorf("dt has %d samples but reserved has %d", n, len(f.Reserved))
	}
	if err := l.checkSteps(f.T0, f.DT); err != nil {
		return err
	}
	t := f.T0
	var used, res uint64
	for i, d := range f.DT {
		t += d
		used += uint64(f.Used[i])
		if len(f.Reserved) != 0 {
			res += uint64(f.Reserved[i])
		}
		l.st.AddNVML(f.Dev, t, used, res)
		l.span(t)
	}
	l.info.Samples += int64(n)
	if l.rates == nil {
		l.rates = map[int]*rate{}
	}
	r := l.rates[f.Dev]
	if r == nil {
		r = &rate{first: f.T0 + f.DT[0]}
		l.rates[f.Dev] = r
	}
	r.n += int64(n)
	r.last = max(r.last, t)
	l.nvmlSeen(f.Dev)
	return nil
}

var batchPrefix = []byte(`{"type":"nvml","dev":`)

// parseBatch parses a batch line in exactly the form the Writer writes
// (appendBatch): no spaces, fields in order, integers without leading
// zeros. It reports false for anything else, which is then decoded by
// encoding/json, so it never accepts a line encoding/json would read
// differently. f's slices are reused.
func parseBatch(b []byte, f *wire.NVML) bool {
	p := batchParser{b: b}
	var dev int64
	ok := p.lit(`{"type":"nvml","dev":`) && p.int(&dev) && dev >= 0 && dev < store.MaxDevices &&
		p.lit(`,"t0":`) && p.int(&f.T0) &&
		p.lit(`,"dt":`) && p.ints(&f.DT) &&
		p.lit(`,"used":`) && p.ints(&f.Used)
	if !ok {
		return false
	}
	f.Type, f.Dev = wire.TypeNVML, int(dev)
	f.Reserved = f.Reserved[:0]
	if p.lit(`,"reserved":`) && !p.ints(&f.Reserved) {
		return false
	}
	return p.lit("}") && p.i == len(b)
}

type batchParser struct {
	b []byte
	i int
}

func (p *batchParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// int parses 0 or -?[1-9][0-9]* within int64.
func (p *batchParser) int(x *int64) bool {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var u uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if p.i-start >= 19 { // 19 digits always fit in a uint64
			return false
		}
		u = u*10 + uint64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	switch {
	case n == 0, n > 1 && p.b[start] == '0', neg && u == 0:
		return false
	case !neg && u > 1<<63-1, neg && u > 1<<63:
		return false
	}
	if neg {
		*x = -int64(u-1) - 1 // no overflow at -1<<63
	} else {
		*x = int64(u)
	}
	return true
}

func (p *batchParser) ints(xs *[]int64) bool {
	*xs = (*xs)[:0]
	if !p.lit("[") {
		return false
	}
	if p.lit("]") {
		return true
	}
	for {
		var x int64
		if !p.int(&x) {
			return false
		}
		*xs = append(*xs, x)
		if p.lit("]") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}
