package memdump

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unsafe"

	"github.com/nlpodyssey/gopickle/types"
)

// Dump is a dump summed up, one Device per CUDA device it covers.
type Dump struct {
	Path    string
	Bytes   int64 // the file's size; -1 when not known
	Devices []Device
	// History: the dump came with torch's allocation history on
	// (trace entries, or stacks on its blocks).
	History bool
	// Settings: the allocator's settings the dump gives
	// (allocator_settings, in recent torch); nil when it gives none.
	Settings *Settings
	// Cut: file names, function names and labels longer than maxText
	// bytes (each string of the file counted once), cut to it
	Cut int
}

// Device is one device's part of a dump.
type Device struct {
	Index     int
	Segments  int    // cudaMalloc'd segments the allocator keeps
	Reserved  uint64 // their total size
	Allocated uint64 // in blocks in use (active_allocated)
	Blocks    int    // how many blocks are in use
	// Free: bytes in the segments' inactive blocks (cached, free for reuse),
	// FreeBlocks of them; LargestFree is the largest single one, the most
	// a request can get without a new segment.
	Free        uint64
	FreeBlocks  int
	LargestFree uint64
	Live        []Group // live blocks by allocating frame, largest first
	Trace       int     // trace entries of the allocation history
	OOM         *OOM    // the history's latest out-of-memory error
	// Structure: the allocator's structure, as gputop shows it live.
	Structure Structure
	// TracePeak: the highest allocated point of the history's trace and
	// the blocks live then, by allocating frame (tracepeak.go); nil
	// without a trace.
	TracePeak *TracePeak
}

// Group is the live blocks one Python frame allocated.
type Group struct {
	Frame     Frame
	Bytes     uint64 // blocks' sizes
	Requested uint64 // what was asked for (sizes are rounded up)
	Blocks    int
	// Labels: the labels of gputop.snapshot calls or phases (torch's user_metadata, set
	// by the agent) their allocations were made under, in the order the
	// blocks lie in memory.
	Labels []string
}

// OOM is an out-of-memory error from the allocation history.
type OOM struct {
	Requested  uint64 // the size of the allocation that failed
	DeviceFree uint64 // the free memory CUDA reported then
	Frame      Frame  // where it was asked for
	Label      string // user_metadata then
	// LargestFree is the largest free block in the device's segments when
	// the dump was taken; in a dump taken at the OOM (gputop's agent
	// does so from torch's OOM observer) that is the largest at the OOM.
	LargestFree uint64
}

// Frame is a Python frame as torch records it.
type Frame struct {
	File string
	Line int
	Name string
}

func (f Frame) String() string {
	if f.File == "" && f.Name == "" {
		return "(no stack: allocated before history was on, or by torch outside Python)"
	}
	return fmt.Sprintf("%s:%d %s", f.File, f.Line, f.Name)
}

// summarise turns an unpickled dump into a Dump, within the visit
// budget for a file of size bytes.
func summarise(ctx context.Context, v any, size int64, c *cost) (*Dump, error) {
	w := &walker{ctx: ctx, size: size, limit: visitLimit(size), frameDicts: map[*types.Dict]frameInfo{},
		stacks: map[any]int{}, ids: map[Frame]int{{}: 0}, byID: []Frame{{}}, torch: map[string]bool{}, cuts: map[cutKey]string{}}
	defer func() { c.visits = w.visits }()
	return w.summarise(v)
}

// walker reads an unpickled dump. Every list element and dict entry
// it looks at is a visit (and a string it hashes, one more for each 256
// bytes): a pickle can refer to the same lists again and again, so that
// a small file holds more blocks than memory, and the visits are what
// bounds the time it takes. Frame dicts and frames lists are read once
// each, however many blocks share them (torch shares frames).
type walker struct {
	ctx           context.Context
	size          int64
	visits, limit int64
	nextCheck     int64
	frameDicts    map[*types.Dict]frameInfo
	stacks        map[any]int     // a frames list (its pointer) -> its allocating frame's id
	ids           map[Frame]int   // allocating frames, interned (0: none)
	byID          []Frame         // ... and back
	torch         map[string]bool // a file name -> torch's own
	cuts          map[cutKey]string
}

// cutKey is a string by identity: the pickle's memo hands the same string
// to every value that refers to it, and cutting it once each is what
// keeps 1000 references to one long label from costing 1000 copies.
type cutKey struct {
	p *byte
	n int
}

// maxText is the most of a file name, function name or label the summary
// keeps (PATH_MAX); longer ones are cut.
const maxText = 4096

func (w *walker) visit(n int) error {
	if w.visits += int64(n); w.visits > w.limit {
		return &BudgetError{Size: w.size, Budget: "visits", Limit: w.limit, Offset: -1}
	}
	if w.visits >= w.nextCheck {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		w.nextCheck = w.visits + 1<<16
	}
	return nil
}

// text is a string value from the dump, cut to maxText; hashing it later
// is paid for here.
func (w *walker) text(v any) (string, error) {
	s, _ := v.(string)
	if len(s) > maxText {
		k := cutKey{unsafe.StringData(s), len(s)}
		c, ok := w.cuts[k]
		if !ok {
			c = strings.ToValidUTF8(s[:maxText], "") + "…"
			w.cuts[k] = c
		}
		s = c
	}
	return s, w.visit(len(s) / 256)
}

// list is a list or tuple value's elements, each a visit.
func (w *walker) list(v any, what func() string) ([]any, error) {
	switch l := v.(type) {
	case *types.List:
		return *l, w.visit(len(*l))
	case *types.Tuple:
		return *l, w.visit(len(*l))
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("%s is %s, not a list", what(), typeName(v))
}

// fields reads a dict's string keys into f, each entry a visit; a key
// given twice keeps its last value, as in Python.
func (w *walker) fields(v any, what func() string, f func(key string, val any)) error {
	d, ok := v.(*types.Dict)
	if !ok {
		return fmt.Errorf("%s is %s, not a dict", what(), typeName(v))
	}
	if err := w.visit(len(*d)); err != nil {
		return err
	}
	for _, e := range *d {
		if k, ok := e.Key.(string); ok {
			f(k, e.Value)
		}
	}
	return nil
}

// field is a value read by fields, and whether the dict had it.
type field struct {
	v   any
	set bool
}

func (f *field) put(v any) { f.v, f.set = v, true }

// uint is a non-negative integer field; absent, 0 unless required.
func (f field) uint(key string, required bool, what func() string) (uint64, error) {
	if !f.set {
		if required {
			return 0, fmt.Errorf("%s has no %q", what(), key)
		}
		return 0, nil
	}
	n, ok := toUint(f.v)
	if !ok {
		return 0, fmt.Errorf("%s: %q is %s, not a non-negative integer", what(), key, typeName(f.v))
	}
	return n, nil
}

func (w *walker) summarise(v any) (*Dump, error) {
	var segments, traces []any
	var set *Settings
	switch s := v.(type) {
	case *types.Dict:
		var sv, tv, settings field
		if err := w.fields(s, func() string { return "the dump" }, func(k string, v any) {
			switch k {
			case "segments":
				sv.put(v)
			case "device_traces":
				tv.put(v)
			case "allocator_settings":
				settings.put(v)
			}
		}); err != nil {
			return nil, err
		}
		if !sv.set {
			return nil, fmt.Errorf("not a torch memory dump: a dict without \"segments\"")
		}
		var err error
		if segments, err = w.list(sv.v, func() string { return "segments" }); err != nil {
			return nil, err
		}
		if traces, err = w.list(tv.v, func() string { return "device_traces" }); err != nil {
			return nil, err
		}
		if settings.set {
			if set, err = w.settings(settings.v); err != nil {
				return nil, err
			}
		}
	case *types.List:
		segments = *s // memory_viz takes a bare list as the segments alone
		if err := w.visit(len(segments)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("not a torch memory dump: the pickle holds %s, not a dict of segments", typeName(v))
	}
	d := &Dump{Bytes: -1, Settings: set}
	devs := map[int]*Device{}
	structures := map[int]*structureOf{}
	dev := func(i int) *Device {
		if devs[i] == nil {
			devs[i] = &Device{Index: i}
			structures[i] = &structureOf{}
		}
		return devs[i]
	}
	// the history first: the label each live block was allocated under
	// is its address's latest alloc entry's user_metadata
	latest := map[[2]uint64]string{} // (device, address) -> user_metadata
	steps := map[int][]traceStep{}   // each device's allocs and frees, for its trace's peak
	for i, tv := range traces {
		entries, err := w.list(tv, func() string { return fmt.Sprintf("device_traces[%d]", i) })
		if err != nil {
			return nil, err
		}
		if len(entries) == 0 {
			continue
		}
		d.History = true
		dv := dev(i)
		dv.Trace = len(entries)
		for j, ev := range entries {
			where := func() string { return fmt.Sprintf("device_traces[%d][%d]", i, j) }
			var action, addr, size, free, frames, meta, when field
			if err := w.fields(ev, where, func(k string, v any) {
				switch k {
				case "time_us":
					when.put(v)
				case "action":
					action.put(v)
				case "addr":
					addr.put(v)
				case "size":
					size.put(v)
				case "device_free":
					free.put(v)
				case "frames":
					frames.put(v)
				case "user_metadata":
					meta.put(v)
				}
			}); err != nil {
				return nil, err
			}
			label, err := w.text(meta.v)
			if err != nil {
				return nil, err
			}
			switch action.v {
			case "alloc", "free_completed":
				a, err := addr.uint("addr", false, where)
				if err != nil {
					return nil, err
				}
				sz, err := size.uint("size", false, where)
				if err != nil {
					return nil, err
				}
				st := traceStep{addr: a, size: sz, label: label}
				if n, ok := toUint(when.v); ok && n < 1<<62 {
					st.timeUS = int64(n)
				}
				if action.v == "alloc" {
					latest[[2]uint64{uint64(i), a}] = label
					if st.frame, _, err = w.allocating(frames.v, where); err != nil {
						return nil, err
					}
					st.alloc = true
				}
				steps[i] = append(steps[i], st)
			case "oom":
				sz, err := size.uint("size", false, where)
				if err != nil {
					return nil, err
				}
				fr, err := free.uint("device_free", false, where)
				if err != nil {
					return nil, err
				}
				id, _, err := w.allocating(frames.v, where)
				if err != nil {
					return nil, err
				}
				dv.OOM = &OOM{Requested: sz, DeviceFree: fr, Frame: w.byID[id], Label: label}
			}
		}
	}
	type group struct {
		g      *Group
		dev    int
		labels map[string]bool
	}
	groups := map[[2]int]*group{} // (device, allocating frame's id)
	var order []*group
	liveNow := map[int]map[uint64]liveBlock{} // each traced device's blocks in use, by address
	for i, sv := range segments {
		where := func() string { return fmt.Sprintf("segment %d", i) }
		var device, total, blocksV, allocated, segType, poolID, expandable field
		if err := w.fields(sv, where, func(k string, v any) {
			switch k {
			case "device":
				device.put(v)
			case "total_size":
				total.put(v)
			case "blocks":
				blocksV.put(v)
			case "allocated_size":
				allocated.put(v)
			case "segment_type":
				segType.put(v)
			case "segment_pool_id":
				poolID.put(v)
			case "is_expandable":
				expandable.put(v)
			}
		}); err != nil {
			return nil, err
		}
		g, err := w.segment(where, allocated, segType, poolID, expandable)
		if err != nil {
			return nil, err
		}
		di, err := device.uint("device", true, where)
		if err != nil {
			return nil, err
		}
		dv := dev(int(di))
		tot, err := total.uint("total_size", true, where)
		if err != nil {
			return nil, err
		}
		g.total = tot
		dv.Segments++
		dv.Reserved = sat(dv.Reserved, tot, nil)
		blocks, err := w.list(blocksV.v, func() string { return fmt.Sprintf("segment %d's blocks", i) })
		if err != nil {
			return nil, err
		}
		g.blocks = len(blocks)
		for j, bv := range blocks {
			where := func() string { return fmt.Sprintf("segment %d block %d", i, j) }
			var size, state, frames, req, addr field
			if err := w.fields(bv, where, func(k string, v any) {
				switch k {
				case "size":
					size.put(v)
				case "state":
					state.put(v)
				case "frames":
					frames.put(v)
				case "requested_size":
					req.put(v)
				case "address":
					addr.put(v)
				}
			}); err != nil {
				return nil, err
			}
			sz, err := size.uint("size", true, where)
			if err != nil {
				return nil, err
			}
			if state.v == "active_pending_free" || state.v == "active_awaiting_free" {
				// freed, not yet completed: live for the trace
				if _, ok := steps[dv.Index]; ok {
					a, _ := addr.uint("address", false, where)
					id, _, err := w.allocating(frames.v, where)
					if err != nil {
						return nil, err
					}
					keepLive(liveNow, dv.Index, a, liveBlock{size: sz, frame: id})
				}
			}
			switch state.v {
			case "active_allocated":
				id, stack, err := w.allocating(frames.v, where)
				if err != nil {
					return nil, err
				}
				if _, ok := steps[dv.Index]; ok {
					a, _ := addr.uint("address", false, where)
					keepLive(liveNow, dv.Index, a, liveBlock{size: sz, frame: id})
				}
				d.History = d.History || stack
				rq, err := req.uint("requested_size", false, where)
				if err != nil {
					return nil, err
				}
				k := [2]int{dv.Index, id}
				gr := groups[k]
				if gr == nil {
					gr = &group{g: &Group{Frame: w.byID[id]}, dev: dv.Index}
					groups[k] = gr
					order = append(order, gr)
				}
				gr.g.Bytes += sz
				gr.g.Requested += rq
				gr.g.Blocks++
				dv.Allocated = sat(dv.Allocated, sz, nil)
				dv.Blocks++
				g.blockAlloc = sat(g.blockAlloc, sz, &g.saturated)
				a, _ := addr.uint("address", false, where)
				if l := latest[[2]uint64{uint64(dv.Index), a}]; l != "" && !gr.labels[l] {
					if gr.labels == nil {
						gr.labels = map[string]bool{}
					}
					gr.labels[l] = true
					gr.g.Labels = append(gr.g.Labels, l)
				}
			case "inactive":
				dv.Free = sat(dv.Free, sz, nil)
				dv.FreeBlocks++
				dv.LargestFree = max(dv.LargestFree, sz)
				g.largestFree = max(g.largestFree, sz)
			case "active_pending_free", "active_awaiting_free":
				g.pending = sat(g.pending, sz, &g.saturated)
			}
		}
		structures[dv.Index].add(g)
	}
	for _, g := range order {
		dv := devs[g.dev]
		dv.Live = append(dv.Live, *g.g)
	}
	for _, dv := range devs {
		slices.SortFunc(dv.Live, func(a, b Group) int {
			if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
				return c
			}
			if c := cmp.Compare(b.Blocks, a.Blocks); c != 0 {
				return c
			}
			return cmpFrame(a.Frame, b.Frame)
		})
		if dv.OOM != nil {
			dv.OOM.LargestFree = dv.LargestFree
		}
		dv.Structure = structures[dv.Index].done()
		if st, ok := steps[dv.Index]; ok {
			dv.TracePeak = tracePeak(st, liveNow[dv.Index], w.byID)
		}
		d.Devices = append(d.Devices, *dv)
	}
	slices.SortFunc(d.Devices, func(a, b Device) int { return cmp.Compare(a.Index, b.Index) })
	d.Cut = len(w.cuts)
	return d, nil
}

// cmpFrame orders frames by file, line and name (never through String:
// a sort of many groups would format each twice a comparison).
func cmpFrame(a, b Frame) int {
	if c := cmp.Compare(a.File, b.File); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Line, b.Line); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// allocating is the id of the frame a block or an OOM is put down to
// (allocPick's rule; 0: none), and whether it had a stack at all; a
// frames list is read once, however many blocks share it.
func (w *walker) allocating(v any, where func() string) (int, bool, error) {
	switch v.(type) {
	case nil:
		return 0, false, nil
	case *types.List, *types.Tuple:
		if id, ok := w.stacks[v]; ok {
			return id, true, nil
		}
	}
	l, err := w.list(v, func() string { return where() + "'s frames" })
	if err != nil || len(l) == 0 {
		return 0, false, err // not kept: an empty list is a byte of the file
	}
	var pick allocPick
	for k, fv := range l {
		fd, ok := fv.(*types.Dict)
		if !ok {
			return 0, false, fmt.Errorf("%s frame %d is %s, not a dict", where(), k, typeName(fv))
		}
		fi, err := w.frame(fd)
		if err != nil {
			return 0, false, err
		}
		if pick.add(fi) {
			break
		}
	}
	f := pick.frame()
	id, ok := w.ids[f]
	if !ok {
		// hashing the frame's strings: paid for when they were read
		id = len(w.byID)
		w.ids[f] = id
		w.byID = append(w.byID, f)
	}
	w.stacks[v] = id
	return id, true, nil
}

// frame reads a frame dict once.
func (w *walker) frame(fd *types.Dict) (frameInfo, error) {
	if fi, ok := w.frameDicts[fd]; ok {
		return fi, nil
	}
	var file, name, line field
	if err := w.fields(fd, func() string { return "a frame" }, func(k string, v any) {
		switch k {
		case "filename":
			file.put(v)
		case "name":
			name.put(v)
		case "line":
			line.put(v)
		}
	}); err != nil {
		return frameInfo{}, err
	}
	var fi frameInfo
	var err error
	if fi.File, err = w.text(file.v); err != nil {
		return frameInfo{}, err
	}
	if fi.Name, err = w.text(name.v); err != nil {
		return frameInfo{}, err
	}
	if n, ok := toUint(line.v); ok && n < 1<<31 {
		fi.Line = int(n)
	}
	fi.python = isPython(fi.File)
	if fi.python {
		torch, ok := w.torch[fi.File]
		if !ok {
			torch = torchFile.MatchString(fi.File)
			w.torch[fi.File] = torch
		}
		fi.torch = torch
	}
	w.frameDicts[fd] = fi
	return fi, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case *types.Dict:
		return "a dict"
	case *types.List:
		return "a list"
	case *types.Tuple:
		return "a tuple"
	case string:
		return "a string"
	case int, *big.Int:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a bool"
	}
	return fmt.Sprintf("a %T", v)
}

// toUint is a non-negative integer value.
func toUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case int:
		if n >= 0 {
			return uint64(n), true
		}
	case *big.Int:
		if n.Sign() >= 0 && n.IsUint64() {
			return n.Uint64(), true
		}
	case bool:
		if n {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
