package wire

import (
	"reflect"
	"slices"
	"strings"
)

// Socket says whether a frame type crosses the agent socket, and which way.
type Socket int

const (
	NotOnSocket Socket = iota // recordings only
	FromAgent                 // an agent process to gputop
	FromShell                 // gputop snap or gputop status to gputop
	ToPeer                    // gputop to an agent or a shell
)

func (s Socket) String() string {
	return [...]string{"recordings only", "agent to gputop", "shell to gputop", "gputop to peer"}[s]
}

// Spec is one frame type of the table: the authority that the socket's
// decoder, the checks, the recorder, the recording loader, the Python
// agent's schema and FORMAT.md's frame table read. Its fields and which
// of them must be present come from its Go struct's json tags: a field
// not tagged omitempty is required, except the ones Optional names; Also
// names omitempty fields a recording must have all the same (pid, which
// gputop fills in on agent frames).
type Spec struct {
	Type     string
	Socket   Socket
	Recorded bool     // a recording holds it: the loader reads it
	Own      bool     // of the recorded, one the recorder writes itself (header, batches), not Writer.Frame
	Doc      string   // FORMAT.md's "what" (markdown), for recorded types
	Also     []string // required in a recording though omitempty
	Optional []string // written always, yet a recording may lack it (the loader never required it)
	Nullable []string // required lists that may be null (encoding/json writes a nil slice so)

	goType reflect.Type
	newPtr func() any
	deref  func(any) Frame
	check  func(Frame) error
	needs  []RequiredField
}

// FrameOf makes the Spec of frame type T, with check (nil: none) as the
// frame's own checks (Check).
func FrameOf[T Frame](s Spec, check func(*T) error) Spec {
	s.goType = reflect.TypeFor[T]()
	s.newPtr = func() any { return new(T) }
	s.deref = func(p any) Frame { return *p.(*T) }
	s.needs = s.required()
	if check != nil {
		s.check = func(f Frame) error {
			if v, ok := f.(T); ok {
				return check(&v)
			}
			return nil
		}
	}
	return s
}

// GoType is the frame's struct.
func (s Spec) GoType() reflect.Type { return s.goType }

// New returns a pointer to a zero frame of this type, to decode into;
// Value returns the frame it points to.
func (s Spec) New() any          { return s.newPtr() }
func (s Spec) Value(p any) Frame { return s.deref(p) }

// Field is one JSON field of a struct, in the struct's order.
type Field struct {
	Name      string
	OmitEmpty bool
	Type      reflect.Type
}

// Fields lists the JSON fields of struct t in order (json:"-" left out).
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if sf.Anonymous && tag == "" && sf.Type.Kind() == reflect.Struct {
			out = append(out, Fields(sf.Type)...) // encoding/json promotes its fields
			continue
		}
		if tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		out = append(out, Field{Name: name, OmitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty"), Type: sf.Type})
	}
	return out
}

// RequiredField is a field a recording's frame must have; Nullable: it
// may be null.
type RequiredField struct {
	Name     string
	Nullable bool
}

// Required lists the fields a frame of this type must have, in the
// struct's order, "type" left out. The list is shared: not to be changed.
func (s Spec) Required() []RequiredField { return s.needs }

func (s Spec) required() []RequiredField {
	var out []RequiredField
	for _, f := range Fields(s.goType) {
		if f.Name == "type" || slices.Contains(s.Optional, f.Name) {
			continue
		}
		if !f.OmitEmpty || slices.Contains(s.Also, f.Name) {
			out = append(out, RequiredField{f.Name, slices.Contains(s.Nullable, f.Name)})
		}
	}
	return out
}

var (
	byType     = map[string]*Spec{}
	order      []string // registration order
	generation int      // counts changes to the table
)

func init() {
	for i := range Frames {
		Register(Frames[i])
	}
}

// Register adds a frame type to the table; recording adds its own
// (dropped), a test one of its own. A type registered twice panics.
func Register(s Spec) {
	if _, dup := byType[s.Type]; dup {
		panic("wire: frame type " + s.Type + " registered twice")
	}
	if s.goType == nil {
		panic("wire: frame type " + s.Type + " made without FrameOf")
	}
	byType[s.Type] = &s
	order = append(order, s.Type)
	generation++
}

// Unregister removes a frame type Register added (for tests).
func Unregister(typ string) {
	delete(byType, typ)
	order = slices.DeleteFunc(order, func(t string) bool { return t == typ })
	generation++
}

// All lists every registered frame type in the order registered: Frames,
// then the others (recording's own, a test's).
func All() []Spec {
	out := make([]Spec, len(order))
	for i, t := range order {
		out[i] = *byType[t]
	}
	return out
}

// Generation changes whenever a frame type is registered or removed, so a
// reader that derives something from the table knows to derive it again.
func Generation() int { return generation }

// Lookup returns the Spec of a frame type, or false when it is unknown.
func Lookup(typ string) (Spec, bool) {
	s, ok := byType[typ]
	if !ok {
		return Spec{}, false
	}
	return *s, true
}

// Frames is the table of wire's frame types, in FORMAT.md's order.
var Frames = []Spec{
	FrameOf[Recording](Spec{Type: TypeRecording, Recorded: true, Own: true,
		Doc: "header, first line only (a repeat, e.g. two files joined with `cat`, must have the same `v`)"}, nil),
	FrameOf[Device](Spec{Type: TypeDevice, Recorded: true,
		Doc: "an NVML device, or a device only an agent sees (see below); `memory`: `\"system\"` when its figures are the system's memory (a unified-memory GPU)"}, checkDevice),
	FrameOf[NVML](Spec{Type: TypeNVML, Recorded: true, Own: true,
		Doc: "a batch of one device's NVML samples (below)"}, nil),
	FrameOf[Procs](Spec{Type: TypeProcs, Recorded: true, Nullable: []string{"procs"},
		Doc: "NVML's process list of a device"}, nil),
	FrameOf[DevError](Spec{Type: TypeDevError, Recorded: true,
		Doc: "an NVML error on a device; `\"error\":\"\"` clears it"}, nil),
	FrameOf[Hello](Spec{Type: TypeHello, Socket: FromAgent, Recorded: true, Nullable: []string{"devices"},
		Doc: "an agent process attached (with `history`, its allocation history's `max_entries`, or `history_error`, as it said them)"}, checkHello),
	FrameOf[Samples](Spec{Type: TypeSamples, Recorded: true, Own: true,
		Doc: "a batch of one agent process's allocator counters on one device (below); `dev` is the torch device index"}, nil),
	FrameOf[Sample](Spec{Type: TypeSample, Socket: FromAgent, Recorded: true, Also: []string{"pid"},
		Doc: "one reading of torch's allocator counters, as the agent sends it; version 1 files hold these instead of `samples`"},
		func(v *Sample) error { return firstErr(checkTime(v.T), checkDev("dev", v.Dev)) }),
	FrameOf[Row](Spec{Type: TypeRow, Recorded: true,
		Doc: "a row of the summary table, with the values it had live and its `id` (below); an end row has `\"end\":true` and, where the agent's attribution came with it, `held` (below); a row taken with a memory dump has `dump` (the agent's report: `path`, `bytes`, `took_ms`, `gil_ms`, `phases` (where the time went), or `error`; the older dumps it removed are named in the log, not in each row); `ledger`, what the process's memory was made of (below)"}, nil),
	FrameOf[OOM](Spec{Type: TypeOOM, Socket: FromAgent, Recorded: true, Also: []string{"pid"},
		Doc: "CUDA out of memory in an agent process; `dump` when the agent wrote a memory dump at it (its row takes it when loaded); `row`, the `id` of the row gputop made of it; `framework`, `error` and `frameworks` for JAX's or CuPy's, with `dev_unknown` when the error named no device and the process uses several (`dev` is then the first)"},
		checkOOM),
	FrameOf[Holders](Spec{Type: TypeHolders, Socket: FromAgent, Recorded: true, Also: []string{"pid"},
		Optional: []string{"total"}, Nullable: []string{"groups"},
		Doc: "an agent's report of what holds CUDA memory, with `held`, the same walk's attribution of the device; `frameworks`, the frameworks other than torch on the device then (as in `framework` frames), each with `held`, what holds its memory (JAX: its live arrays grouped)"}, checkHolders),
	FrameOf[LayoutReading](Spec{Type: TypeLayout, Socket: FromAgent, Recorded: true, Also: []string{"pid"},
		Doc: "the caching allocator's structure on one device of an agent process (`dev`, torch's index), read at the agent's low rate: segments, blocks, free in segments, the largest free block, the pools, the settings in force; or `skipped`, why there is no reading this time"}, checkLayoutReading),
	FrameOf[FrameworkReading](Spec{Type: TypeFramework, Socket: FromAgent, Recorded: true, Also: []string{"pid"}, Nullable: []string{"frameworks"},
		Doc: "the allocator figures of the frameworks other than torch (JAX's XLA allocator, CuPy's memory pool) on one device of an agent process, each figure with gputop's name (`of`: `in_use`, `reserved`, `peak`, `limit`) and the framework's own (`native`), at the agent's send interval; `settings`, the framework's allocator settings in force (JAX's `XLA_PYTHON_CLIENT_*`)"}, checkFrameworkReading),
	FrameOf[RowHeld](Spec{Type: TypeRowHeld, Recorded: true,
		Doc: "the attribution of an end row that came after the row (its `t` is the row's): the agent's answer to gputop's request, or why there is none (`held.skipped`); `ledger`, the same walk's ledger, which a row taken with a key or `gputop snap` waits for too (its `held` is the walk's, and not the row's: only an end row takes one); `frameworks`, the same walk's frameworks, whose `held` an end row takes for the frameworks it shows"},
		func(v *RowHeld) error { return checkFrameworks("frameworks", v.Frameworks) }),
	FrameOf[RowEdit](Spec{Type: TypeRowEdit, Recorded: true,
		Doc: "the user renamed (`rename`, the new label) or deleted (`\"delete\":true`) a row in the TUI: the row `id`, which is the row of `pid` (left out: the row of no agent process) on `dev` at `t` labelled `label`; exactly one of `rename` and `delete`"}, checkRowEdit),
	FrameOf[Bye](Spec{Type: TypeBye, Socket: FromAgent, Recorded: true, Also: []string{"pid"},
		Doc: "an agent detached cleanly"}, func(v *Bye) error { return checkTime(v.T) }),
	FrameOf[Ended](Spec{Type: TypeEnded, Recorded: true,
		Doc: "an agent process vanished without `bye` (killed)"}, nil),
	FrameOf[Host](Spec{Type: TypeHost, Recorded: true, Optional: []string{"up"},
		Doc: "a remote host of a multi-host view (`gputop --ssh`) connecting (`\"up\":true`) or disconnecting (`\"up\":false`, `reason`) at `t`, and what the bounds on its stream kept out of the view (`limited`, e.g. devices past its share; below)"}, nil),
	FrameOf[Mark](Spec{Type: TypeMark, Socket: FromAgent}, checkMark),
	FrameOf[Snap](Spec{Type: TypeSnap, Socket: FromShell}, checkSnap),
	FrameOf[Status](Spec{Type: TypeStatus, Socket: FromShell}, func(v *Status) error { return checkVersion(v.V) }),
	FrameOf[Reply](Spec{Type: TypeReply, Socket: ToPeer}, nil),
	FrameOf[Request](Spec{Type: TypeRequest, Socket: ToPeer}, checkRequest),
}
