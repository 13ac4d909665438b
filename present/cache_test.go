package present

import (
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// cacheStore is screenStore with torch's cache read by pid 42's agent: at
// 2 s the default pool alone, at 4 s with a graph's private pool, at 6 s
// without it again, and at 7 s a reading skipped.
func cacheStore() *store.Store {
	st := screenStore()
	reading := func(t int64, free uint64, pools ...wire.Pool) {
		l := wire.Layout{T: t, Segments: 3 + len(pools), Reserved: 3 << 29, Allocated: 3<<29 - free, FreeInSegments: free, LargestFree: free / 2,
			Pools: append([]wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 3, Reserved: 1 << 30}}, pools...)}
		st.AgentLayout(42, wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: l})
	}
	reading(2*sec, 256<<20)
	reading(4*sec, 128<<20, wire.Pool{Kind: wire.PoolGraph, ID: "1,2", Segments: 1, Reserved: 1 << 29})
	reading(6*sec, 64<<20)
	st.AgentLayout(42, wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Skipped: "too many blocks", Layout: wire.Layout{T: 7 * sec}})
	return st
}

// In replay the selected process's cache is the reading at the cursor (a
// pool there from 4 s and gone at 6 s, a skip's reason from 7 s); live it
// is the newest; a process without an agent has none. With LargestFree
// asked for, the chart has the largest free block as a series of its own.
func TestScreenCacheAtCursor(t *testing.T) {
	st := cacheStore()
	p := NewPresenter()
	at := func(c int64, largest bool) Screen {
		return p.Screen(st, Query{Cursor: c, Replay: true, From: 0, To: c + 1, Cols: 10, LargestFree: largest})
	}
	if s := at(sec, false); s.Cache != nil {
		t.Fatalf("at 1 s, before any reading: %+v", s.Cache)
	}
	for _, c := range []struct {
		at      int64
		free    uint64
		pools   int
		skipped string
	}{{2 * sec, 256 << 20, 1, ""}, {5 * sec, 128 << 20, 2, ""}, {6 * sec, 64 << 20, 1, ""}, {9 * sec, 64 << 20, 1, "too many blocks"}} {
		s := at(c.at, false)
		k := s.Cache
		if k == nil || !k.OK || k.PID != 42 || k.Dev != 0 || k.At != c.at || k.Live || k.Layout.FreeInSegments != c.free || len(k.Layout.Pools) != c.pools || k.Skipped != c.skipped {
			t.Fatalf("at %d s: cache %+v", c.at/sec, k)
		}
		if len(s.Series) != 4 {
			t.Fatalf("at %d s: %d series without the largest free block asked for", c.at/sec, len(s.Series))
		}
	}
	s := at(5*sec, true)
	if len(s.Series) != 5 || s.Series[4].Kind != TorchLargestFree || s.Series[4].Name != LargestFreeSeries ||
		s.Series[4].Now == nil || *s.Series[4].Now != 64<<20 {
		t.Fatalf("the largest free block's series at 5 s: %+v", s.Series[len(s.Series)-1])
	}
	live := p.Screen(st, Query{Now: 10 * sec, Cursor: 10 * sec, From: 0, To: 10 * sec, Cols: 10})
	if k := live.Cache; k == nil || !k.Live || k.Layout.T != 6*sec || k.Skipped != "too many blocks" {
		t.Fatalf("live: cache %+v", k)
	}
	other := p.Screen(st, Query{Cursor: 5 * sec, Replay: true, PID: 7, Picked: true, From: 0, To: 5 * sec, Cols: 10})
	if other.Cache != nil {
		t.Fatalf("an NVML-only process: cache %+v", other.Cache)
	}
}
