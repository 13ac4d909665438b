package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
)

// The achieved rate moves by a sample from one second to the next; the
// header shows it again only when it moved by more than 1%, so that a
// still screen is not drawn again every second for it.
func TestRateShownMovesOnlyPastItsStep(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", Total: h200, Source: "nvml"})
	now := fixtureNow
	// a flat GPU: the chart's window full of the same figure
	flat := func(until time.Time) {
		for at := now; !at.After(until); at = at.Add(100 * time.Millisecond) {
			st.AddNVML(0, at.UnixNano(), 2*gib, 0)
		}
	}
	flat(now.Add(2 * time.Minute))
	now = now.Add(2 * time.Minute)
	m := newModel(t, st, Options{Now: func() time.Time { return now }}, 160, 50)
	tick := func() {
		flat(now.Add(time.Second))
		now = now.Add(time.Second)
		nm, _ := m.Update(tickMsg(now))
		m = nm.(Model)
	}
	for _, c := range []struct {
		rate float64
		want string
	}{
		{998, "998 samples/s"},
		{1000, "998 samples/s"},
		{997, "998 samples/s"},
		{1007.9, "998 samples/s"},
		{1009, "1009 samples/s"},
		{990, "990 samples/s"},
		{0.5, "0.5 samples/s"},
	} {
		st.SetRate(0, c.rate)
		tick()
		if scr := screen(m); !strings.Contains(scr, c.want) {
			t.Fatalf("achieved rate %v: want %q in the header:\n%s", c.rate, c.want, strings.SplitN(scr, "\n", 3)[1])
		}
	}
	before := m.Stats().Frames
	for i := range 20 { // its rate jittering by a sample
		st.SetRate(0, 0.5+float64(i%2)*0.001)
		tick()
	}
	if n := m.Stats().Frames - before; n != 0 {
		t.Errorf("%d frames drawn for a rate that moved by 0.2%% and nothing else", n)
	}
}
