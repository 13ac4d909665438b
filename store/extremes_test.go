package store

import (
	"testing"
	"time"
)

// A 5 ms spike and a dip show in the extremes of every window that covers
// them, however far back they are in the raw window or the tiers, as often
// as asked; a window that begins after them has the value held instead.
func TestExtremesFromAWindow(t *testing.T) {
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
			for i := int64(0); i < 15_000; i++ { // 15 s at 1 kHz
				v := uint64(1000 + i%3)
				if i >= 7000 && i < 7005 {
					v = 9000 // the spike
				}
				if i == 12000 {
					v = 10 // a dip
				}
				st.AddNVML(0, t0+i*ms, v, 0)
			}
			last := uint64(1000 + 14_999%3)
			// two scrapers asking for the same window get the same answer
			for range 2 {
				if e := st.ExtremesFrom(k, t0+2000*ms); !e.OK || e.Max != 9000 || e.Min != 10 || e.Last != last {
					t.Fatalf("window from 2 s: %+v", e)
				}
			}
			if e := st.ExtremesFrom(k, t0+11_000*ms); e.Max == 9000 || e.Min != 10 {
				t.Fatalf("window from 11 s: %+v, want the dip and not the spike", e)
			}
			// a window after the newest sample: the value held all along
			if e := st.ExtremesFrom(k, t0+60_000*ms); e.Max != last || e.Min != last {
				t.Fatalf("window after the samples: %+v, want %d", e, last)
			}
		})
	}
	if e := New(DefaultOptions()).ExtremesFrom(Key{}, 0); e.OK {
		t.Fatalf("no series: %+v", e)
	}
}

// The value a series held when the window began counts: a process at
// 5000 that sent its last sample before the window still holds 5000 in it.
func TestExtremesFromCountsTheValueHeld(t *testing.T) {
	st := New(DefaultOptions())
	k := Key{Dev: 0, Metric: NVMLUsed}
	st.AddNVML(0, 1000, 5000, 0)
	st.AddNVML(0, 3000, 7000, 0)
	if e := st.ExtremesFrom(k, 2000); e.Min != 5000 || e.Max != 7000 {
		t.Fatalf("%+v: want 5000 (held at the window's start) to 7000", e)
	}
}
