package store

import (
	"testing"
	"time"
)

// A 5 ms spike between two calls shows in the second call's Max, however
// far back it is in the raw window or the tiers, and not in the third.
func TestExtremesSinceKeepsASpike(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  Options
	}{
		{"raw window", DefaultOptions()},
		{"tiers only", Options{RawCapacity: 100, Tiers: DefaultOptions().Tiers}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := New(c.opt)
			k := Key{Dev: 0, Metric: NVMLUsed}
			const ms = int64(time.Millisecond)
			t0 := int64(1_767_225_600_000_000_000)
			at := int64(0)
			for i := int64(0); i < 15_000; i++ { // 15 s at 1 kHz
				v := uint64(1000 + i%3)
				if i >= 7000 && i < 7005 {
					v = 9000 // the spike
				}
				if i == 12000 {
					v = 10 // a dip
				}
				st.AddNVML(0, t0+i*ms, v, 0)
				if i == 2000 {
					at = st.ExtremesSince(k, 0).LastT
				}
			}
			e := st.ExtremesSince(k, at)
			if !e.OK || e.Max != 9000 || e.Min != 10 || e.Last != 1000+14_999%3 || e.LastT != t0+14_999*ms {
				t.Fatalf("since the first call: %+v", e)
			}
			e2 := st.ExtremesSince(k, e.LastT)
			if e2.Max != e.Last || e2.Min != e.Last {
				t.Fatalf("nothing new: %+v, want the value held (%d)", e2, e.Last)
			}
			// a sample that reaches the store late, stamped before the last
			// call, still counts in the next one
			st.AddNVML(0, e.LastT-50*ms, 7777, 0)
			if e3 := st.ExtremesSince(k, e2.LastT); e3.Max != 7777 {
				t.Fatalf("a late sample was missed: %+v", e3)
			}
		})
	}
	if e := New(DefaultOptions()).ExtremesSince(Key{}, 0); e.OK {
		t.Fatalf("no series: %+v", e)
	}
}
