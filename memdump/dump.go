package memdump

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"

	"github.com/nlpodyssey/gopickle/types"
)

// Dump is a snapshot summed up, one Device per CUDA device it covers.
type Dump struct {
	Path    string
	Bytes   int64 // the file's size; -1 when not known
	Devices []Device
	// History: the snapshot came with torch's allocation history on
	// (trace entries, or stacks on its blocks).
	History bool
}

// Device is one device's part of a snapshot.
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
}

// Group is the live blocks one Python frame allocated.
type Group struct {
	Frame     Frame
	Bytes     uint64 // blocks' sizes
	Requested uint64 // what was asked for (sizes are rounded up)
	Blocks    int
	// Labels: the snapshot labels or phases (torch's user_metadata, set
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
	// the snapshot was taken; in a dump taken at the OOM (gputop's agent
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

// summarise turns an unpickled snapshot into a Dump.
func summarise(v any) (*Dump, error) {
	var segments, traces []any
	switch s := v.(type) {
	case *types.Dict:
		sv, ok := s.Get("segments")
		if !ok {
			return nil, fmt.Errorf("not a torch memory snapshot: a dict without \"segments\"")
		}
		var err error
		if segments, err = list(sv, "segments"); err != nil {
			return nil, err
		}
		if tv, ok := s.Get("device_traces"); ok && tv != nil {
			if traces, err = list(tv, "device_traces"); err != nil {
				return nil, err
			}
		}
	case *types.List:
		segments = *s // memory_viz takes a bare list as the segments alone
	default:
		return nil, fmt.Errorf("not a torch memory snapshot: the pickle holds %s, not a dict of segments", typeName(v))
	}
	d := &Dump{Bytes: -1}
	devs := map[int]*Device{}
	dev := func(i int) *Device {
		if devs[i] == nil {
			devs[i] = &Device{Index: i}
		}
		return devs[i]
	}
	groups := map[int]map[Frame]*Group{}
	type liveBlock struct {
		dev  int
		addr uint64
		g    *Group
	}
	var live []liveBlock
	for i, sv := range segments {
		seg, ok := sv.(*types.Dict)
		if !ok {
			return nil, fmt.Errorf("segment %d is %s, not a dict", i, typeName(sv))
		}
		di, err := intField(seg, "device", fmt.Sprintf("segment %d", i))
		if err != nil {
			return nil, err
		}
		dv := dev(int(di))
		total, err := intField(seg, "total_size", fmt.Sprintf("segment %d", i))
		if err != nil {
			return nil, err
		}
		dv.Segments++
		dv.Reserved += total
		bv, _ := seg.Get("blocks")
		blocks, err := list(bv, fmt.Sprintf("segment %d's blocks", i))
		if err != nil {
			return nil, err
		}
		for j, bv := range blocks {
			where := fmt.Sprintf("segment %d block %d", i, j)
			b, ok := bv.(*types.Dict)
			if !ok {
				return nil, fmt.Errorf("%s is %s, not a dict", where, typeName(bv))
			}
			size, err := intField(b, "size", where)
			if err != nil {
				return nil, err
			}
			state, _ := b.Get("state")
			switch state {
			case "active_allocated":
				frames, err := framesOf(b, where)
				if err != nil {
					return nil, err
				}
				if len(frames) > 0 {
					d.History = true
				}
				f := Allocating(frames)
				if groups[dv.Index] == nil {
					groups[dv.Index] = map[Frame]*Group{}
				}
				g := groups[dv.Index][f]
				if g == nil {
					g = &Group{Frame: f}
					groups[dv.Index][f] = g
				}
				req, err := optInt(b, "requested_size", where)
				if err != nil {
					return nil, err
				}
				g.Bytes += size
				g.Requested += req
				g.Blocks++
				dv.Allocated += size
				dv.Blocks++
				addr, _ := optInt(b, "address", where)
				live = append(live, liveBlock{dv.Index, addr, g})
			case "inactive":
				dv.Free += size
				dv.FreeBlocks++
				dv.LargestFree = max(dv.LargestFree, size)
			}
		}
	}
	// labels: the user_metadata of each live block's latest alloc entry
	latest := map[[2]uint64]string{} // (device, address) -> user_metadata
	for i, tv := range traces {
		entries, err := list(tv, fmt.Sprintf("device_traces[%d]", i))
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
			where := fmt.Sprintf("device_traces[%d][%d]", i, j)
			e, ok := ev.(*types.Dict)
			if !ok {
				return nil, fmt.Errorf("%s is %s, not a dict", where, typeName(ev))
			}
			action, _ := e.Get("action")
			meta, _ := e.Get("user_metadata")
			label, _ := meta.(string)
			switch action {
			case "alloc":
				addr, err := optInt(e, "addr", where)
				if err != nil {
					return nil, err
				}
				latest[[2]uint64{uint64(i), addr}] = label
			case "oom":
				size, err := optInt(e, "size", where)
				if err != nil {
					return nil, err
				}
				free, err := optInt(e, "device_free", where)
				if err != nil {
					return nil, err
				}
				frames, err := framesOf(e, where)
				if err != nil {
					return nil, err
				}
				dv.OOM = &OOM{Requested: size, DeviceFree: free, Frame: Allocating(frames), Label: label}
			}
		}
	}
	for _, b := range live {
		if l, ok := latest[[2]uint64{uint64(b.dev), b.addr}]; ok && l != "" && !slices.Contains(b.g.Labels, l) {
			b.g.Labels = append(b.g.Labels, l)
		}
	}
	for _, dv := range devs {
		for _, g := range groups[dv.Index] {
			dv.Live = append(dv.Live, *g)
		}
		slices.SortFunc(dv.Live, func(a, b Group) int {
			if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
				return c
			}
			if c := cmp.Compare(b.Blocks, a.Blocks); c != 0 {
				return c
			}
			return cmp.Compare(a.Frame.String(), b.Frame.String())
		})
		if dv.OOM != nil {
			dv.OOM.LargestFree = dv.LargestFree
		}
		d.Devices = append(d.Devices, *dv)
	}
	slices.SortFunc(d.Devices, func(a, b Device) int { return cmp.Compare(a.Index, b.Index) })
	return d, nil
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

func list(v any, what string) ([]any, error) {
	switch l := v.(type) {
	case *types.List:
		return *l, nil
	case *types.Tuple:
		return *l, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("%s is %s, not a list", what, typeName(v))
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

func intField(d *types.Dict, key, where string) (uint64, error) {
	v, ok := d.Get(key)
	if !ok {
		return 0, fmt.Errorf("%s has no %q", where, key)
	}
	n, ok := toUint(v)
	if !ok {
		return 0, fmt.Errorf("%s: %q is %s, not a non-negative integer", where, key, typeName(v))
	}
	return n, nil
}

// optInt is an integer field that may be absent (0 then).
func optInt(d *types.Dict, key, where string) (uint64, error) {
	if _, ok := d.Get(key); !ok {
		return 0, nil
	}
	return intField(d, key, where)
}

func framesOf(d *types.Dict, where string) ([]Frame, error) {
	v, ok := d.Get("frames")
	if !ok || v == nil {
		return nil, nil
	}
	l, err := list(v, where+"'s frames")
	if err != nil {
		return nil, err
	}
	out := make([]Frame, 0, len(l))
	for k, fv := range l {
		fd, ok := fv.(*types.Dict)
		if !ok {
			return nil, fmt.Errorf("%s frame %d is %s, not a dict", where, k, typeName(fv))
		}
		var f Frame
		if s, ok := field(fd, "filename").(string); ok {
			f.File = s
		}
		if s, ok := field(fd, "name").(string); ok {
			f.Name = s
		}
		if n, ok := toUint(field(fd, "line")); ok && n < 1<<31 {
			f.Line = int(n)
		}
		out = append(out, f)
	}
	return out, nil
}

func field(d *types.Dict, key string) any {
	v, _ := d.Get(key)
	return v
}
