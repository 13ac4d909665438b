package memdump

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
)

// Structure is the caching allocator's structure on one device, read
// from a dump's segments: the same reading gputop shows live (reserved,
// allocated, what the cache holds free, its largest free block, how
// fragmented that is, the pools), so that a dump from any tool
// (memory_viz's pickles too) reads the same as a live process.
type Structure struct {
	Segments   int // segments (cudaMalloc'd, or mapped when expandable)
	Expandable int // of them torch maps as expandable segments (is_expandable)
	Blocks     int // blocks in the segments, in every state
	Reserved   uint64
	// Allocated is the segments' allocated_size; a segment without one
	// counts its active_allocated blocks.
	Allocated uint64
	// LargestFree is the largest inactive block: the most one request
	// can get from the cache without a new segment.
	LargestFree uint64
	// PendingFree is in blocks freed but still in use by another stream
	// (active_pending_free): counted in neither allocated nor the largest
	// free block.
	PendingFree uint64
	// Pools: the segments by pool and type, the default pool first, then
	// the most reserved.
	Pools []Pool
	// Saturated: a sum passed 2^64-1 bytes and was held there (the sizes
	// are no real device's).
	Saturated bool
}

// Free is what the cache holds free in its segments: reserved −
// allocated ("free in torch's cache"); 0 in a dump whose allocated
// exceeds its reserved.
func (s Structure) Free() uint64 {
	if s.Allocated > s.Reserved {
		return 0
	}
	return s.Reserved - s.Allocated
}

// Fragmentation is 1 − largest free block ÷ free in the segments: 0 when
// the free memory is one block (or there is none), near 1 when it is in
// many small pieces.
func (s Structure) Fragmentation() float64 {
	free := s.Free()
	if free == 0 || s.LargestFree >= free {
		return 0
	}
	return 1 - float64(s.LargestFree)/float64(free)
}

// Pool is a device's segments of one pool (segment_pool_id) and one
// segment_type.
type Pool struct {
	ID    [2]uint64 // segment_pool_id; (0, 0) is the default pool
	HasID bool      // the dump gave one (older torch writes none)
	Type  string    // segment_type: "large" or "small" ("" when absent)

	Segments    int
	Reserved    uint64
	Allocated   uint64
	LargestFree uint64
}

// Kind is "default" for the default pool (0, 0), "private" for any
// other: a CUDA graph's pool and a torch.cuda.MemPool both have a
// non-zero id, and a dump does not say which it is; "unknown" when the
// dump has no pool ids.
func (p Pool) Kind() string {
	switch {
	case !p.HasID:
		return "unknown"
	case p.ID == [2]uint64{}:
		return "default"
	}
	return "private"
}

// IDText is the pool's id as torch writes it, (a, b).
func (p Pool) IDText() string {
	if !p.HasID {
		return "-"
	}
	return fmt.Sprintf("(%d, %d)", p.ID[0], p.ID[1])
}

// poolKey is a pool and segment type on a device.
type poolKey struct {
	id    [2]uint64
	hasID bool
	typ   string
}

// structureOf collects one device's structure while the walker reads
// its segments.
type structureOf struct {
	s     Structure
	pools map[poolKey]*Pool
}

// segment is what one segment adds: its pool, its figures, and the
// figures of its blocks (blockAlloc: its active_allocated blocks' sizes,
// for a segment without allocated_size).
type segment struct {
	pool                poolKey
	expandable          bool
	total               uint64
	allocated           uint64
	hasAllocated        bool
	blocks              int
	blockAlloc, pending uint64
	largestFree         uint64
	saturated           bool
}

// sat is a + b held at 2^64-1 (a hostile dump's sizes add up to a large
// figure, not a small one); held, when given, is set when it is.
func sat(a, b uint64, held *bool) uint64 {
	if a > math.MaxUint64-b {
		if held != nil {
			*held = true
		}
		return math.MaxUint64
	}
	return a + b
}

// segment reads what a segment says of its place in the allocator: its
// pool (segment_pool_id, a pair of non-negative integers), its type
// (segment_type), whether it is expandable (is_expandable) and its
// allocated_size; each may be absent (older torch, other tools), none may
// be of another type.
func (w *walker) segment(where func() string, allocated, typ, pool, expandable field) (segment, error) {
	var g segment
	var err error
	if allocated.set {
		if g.allocated, err = allocated.uint("allocated_size", false, where); err != nil {
			return g, err
		}
		g.hasAllocated = true
	}
	if typ.set {
		if _, ok := typ.v.(string); !ok {
			return g, fmt.Errorf("%s: \"segment_type\" is %s, not a string", where(), typeName(typ.v))
		}
		if g.pool.typ, err = w.text(typ.v); err != nil {
			return g, err
		}
	}
	if pool.set {
		var ids []any
		switch pool.v.(type) {
		case *types.List, *types.Tuple:
			if ids, err = w.list(pool.v, where); err != nil {
				return g, err
			}
		default:
			return g, fmt.Errorf("%s: \"segment_pool_id\" is %s, not a pair of non-negative integers", where(), typeName(pool.v))
		}
		if len(ids) != 2 {
			return g, fmt.Errorf("%s: \"segment_pool_id\" has %d elements, not a pair of non-negative integers", where(), len(ids))
		}
		for k, id := range ids {
			n, ok := toUint(id)
			if _, isBool := id.(bool); !ok || isBool {
				what := typeName(id)
				switch x := id.(type) {
				case int:
					what = fmt.Sprint(x)
				case *big.Int:
					what = x.String()
				}
				return g, fmt.Errorf("%s: \"segment_pool_id\"[%d] is %s, not a non-negative integer below 2^64", where(), k, what)
			}
			g.pool.id[k] = n
		}
		g.pool.hasID = true
	}
	if expandable.set {
		switch e := expandable.v.(type) {
		case bool:
			g.expandable = e
		case nil:
		default:
			return g, fmt.Errorf("%s: \"is_expandable\" is %s, not a bool", where(), typeName(e))
		}
	}
	return g, nil
}

func (so *structureOf) add(g segment) {
	s := &so.s
	if so.pools == nil {
		so.pools = map[poolKey]*Pool{}
	}
	p := so.pools[g.pool]
	if p == nil {
		p = &Pool{ID: g.pool.id, HasID: g.pool.hasID, Type: g.pool.typ}
		so.pools[g.pool] = p
	}
	alloc := g.allocated
	if !g.hasAllocated {
		alloc = g.blockAlloc
	}
	s.Saturated = s.Saturated || g.saturated
	s.Segments++
	if g.expandable {
		s.Expandable++
	}
	s.Blocks += g.blocks
	held := &s.Saturated
	s.Reserved = sat(s.Reserved, g.total, held)
	s.Allocated = sat(s.Allocated, alloc, held)
	s.PendingFree = sat(s.PendingFree, g.pending, held)
	s.LargestFree = max(s.LargestFree, g.largestFree)
	p.Segments++
	p.Reserved = sat(p.Reserved, g.total, held)
	p.Allocated = sat(p.Allocated, alloc, held)
	p.LargestFree = max(p.LargestFree, g.largestFree)
}

// done is the structure with its pools in order: the default pool
// first, then the most reserved, then by id and type.
func (so *structureOf) done() Structure {
	s := so.s
	s.Pools = make([]Pool, 0, len(so.pools))
	for _, p := range so.pools {
		s.Pools = append(s.Pools, *p)
	}
	rank := map[string]int{"default": 0, "private": 1, "unknown": 2}
	slices.SortFunc(s.Pools, func(a, b Pool) int {
		if c := cmp.Compare(rank[a.Kind()], rank[b.Kind()]); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Reserved, a.Reserved); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ID[0], b.ID[0]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.ID[1], b.ID[1]); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	return s
}
