package native_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/sampler/native"
	"github.com/gputop/gputop/sampler/native/nativetest"
)

const (
	notSupported = 3  // NVML_ERROR_NOT_SUPPORTED
	gpuLost      = 15 // NVML_ERROR_GPU_IS_LOST
)

// collect drains GPU dev until want readings arrived or 10 s passed.
func collect(t *testing.T, l *native.Loop, dev, want int) []native.Sample {
	t.Helper()
	var got []native.Sample
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		l.Drain(dev, func(s native.Sample) { got = append(got, s) })
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) < want {
		t.Fatalf("GPU %d: %d readings after 10 s, want %d", dev, len(got), want)
	}
	return got
}

func start(t *testing.T, c native.Config) *native.Loop {
	t.Helper()
	c.Funcs = nativetest.Funcs()
	if c.Period == 0 {
		c.Period = time.Millisecond
	}
	if c.Retry == 0 {
		c.Retry = 20 * time.Millisecond
	}
	l, err := native.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

func handles(t *testing.T, n int) []uintptr {
	t.Helper()
	f := nativetest.Funcs()
	hs := make([]uintptr, n)
	for i := range hs {
		h, r := f.Handle(i)
		if r != 0 || h == 0 {
			t.Fatalf("handle %d: ret %d", i, r)
		}
		hs[i] = h
	}
	return hs
}

func TestReadingsInOrderPerGPU(t *testing.T) {
	nativetest.Set(0, 5<<30, 300<<20, 0, 0)
	nativetest.Set(1, 7<<30, 0, 0, 0)
	l := start(t, native.Config{Handles: handles(t, 2), V1: []bool{false, false}})
	before := time.Now().UnixNano()
	for dev, want := range []uint64{5 << 30, 7 << 30} {
		got := collect(t, l, dev, 50)
		for i, s := range got {
			if s.Ret != 0 || s.Used != want || s.V1 {
				t.Fatalf("GPU %d reading %d: %+v, want used %d from the v2 query", dev, i, s, want)
			}
			if i > 0 && s.T < got[i-1].T {
				t.Fatalf("GPU %d: time went back at reading %d: %d < %d", dev, i, s.T, got[i-1].T)
			}
		}
		if dev == 0 && got[0].Reserved != 300<<20 {
			t.Errorf("reserved %d, want %d", got[0].Reserved, 300<<20)
		}
		if got[0].T < before-int64(time.Second) || got[0].T > time.Now().UnixNano() {
			t.Errorf("timestamp %d is not Unix ns near now", got[0].T)
		}
	}
	// the values are read at each tick, not once
	nativetest.Set(0, 6<<30, 300<<20, 0, 0)
	var last native.Sample
	deadline := time.Now().Add(10 * time.Second)
	for last.Used != 6<<30 && time.Now().Before(deadline) {
		l.Drain(0, func(s native.Sample) { last = s })
		time.Sleep(5 * time.Millisecond)
	}
	if last.Used != 6<<30 {
		t.Fatalf("a changed figure never arrived: last %+v", last)
	}
}

func TestUnsampledGPUHasNoReadings(t *testing.T) {
	nativetest.Set(2, 1<<30, 0, 0, 0)
	hs := handles(t, 3)
	hs[1] = 0
	l := start(t, native.Config{Handles: hs, V1: make([]bool, 3)})
	collect(t, l, 2, 20)
	if n := l.Drain(1, func(native.Sample) {}); n != 0 {
		t.Fatalf("GPU without a handle gave %d readings", n)
	}
	if n := l.Drain(7, func(native.Sample) {}); n != 0 {
		t.Fatalf("a GPU index out of range gave %d readings", n)
	}
}

// NOT_SUPPORTED from the v2 query moves the GPU to the v1 query for good;
// its readings then say so (no reserved figure).
func TestFallsBackToV1(t *testing.T) {
	nativetest.Set(3, 2<<30, 9<<20, notSupported, 0)
	v2Before := nativetest.Calls(3, false)
	hs := handles(t, 4)
	l := start(t, native.Config{Handles: hs, V1: make([]bool, 4)})
	got := collect(t, l, 3, 30)
	for i, s := range got {
		if s.Ret != 0 || !s.V1 || s.Used != 2<<30 || s.Reserved != 0 {
			t.Fatalf("reading %d: %+v, want a v1 reading of 2 GiB", i, s)
		}
	}
	if n := nativetest.Calls(3, false) - v2Before; n != 1 {
		t.Errorf("v2 query called %d times; after NOT_SUPPORTED it should not be called again", n)
	}
}

func TestOldDriverUsesV1Only(t *testing.T) {
	nativetest.Set(4, 3<<30, 0, 0, 0)
	v2Before := nativetest.Calls(4, false)
	f := nativetest.Funcs()
	f.GetV2 = 0
	l, err := native.Start(native.Config{Funcs: f, Handles: handles(t, 5), V1: make([]bool, 5), Period: time.Millisecond, Retry: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	got := collect(t, l, 4, 10)
	if !got[0].V1 || got[0].Used != 3<<30 {
		t.Fatalf("reading %+v, want v1 3 GiB", got[0])
	}
	if nativetest.Calls(4, false) != v2Before {
		t.Fatal("the v2 query was called without its symbol")
	}
}

// A failing GPU reports its error, is read again only every Retry, and
// recovers by itself.
func TestErrorsAreRetriedSlowly(t *testing.T) {
	nativetest.Set(5, 1<<30, 0, gpuLost, gpuLost)
	hs := handles(t, 6)
	l := start(t, native.Config{Handles: hs, V1: make([]bool, 6), Period: 100 * time.Microsecond, Retry: 50 * time.Millisecond})
	got := collect(t, l, 5, 3)
	for _, s := range got {
		if s.Ret != gpuLost {
			t.Fatalf("reading %+v, want ret %d", s, gpuLost)
		}
	}
	// at 10 kHz a GPU read every tick would give ~20x more error readings
	// than one read every 50 ms; the test allows a wide margin for a slow
	// machine.
	calls0 := nativetest.Calls(5, false)
	time.Sleep(300 * time.Millisecond)
	if n := nativetest.Calls(5, false) - calls0; n > 60 {
		t.Errorf("%d calls on a failing GPU in 300 ms; want it retried every 50 ms, not every tick", n)
	}
	nativetest.Set(5, 1<<30, 0, 0, 0)
	var ok bool
	deadline := time.Now().Add(10 * time.Second)
	for !ok && time.Now().Before(deadline) {
		l.Drain(5, func(s native.Sample) { ok = ok || (s.Ret == 0 && s.Used == 1<<30) })
		time.Sleep(5 * time.Millisecond)
	}
	if !ok {
		t.Fatal("the GPU never recovered")
	}
}

// When nobody drains, the ring fills and further readings are counted as
// dropped; the ones kept are the oldest, in order.
func TestFullRingDropsAndCounts(t *testing.T) {
	nativetest.Set(6, 1, 0, 0, 0)
	hs := handles(t, 7)
	l := start(t, native.Config{Handles: hs, V1: make([]bool, 7), Period: 20 * time.Microsecond})
	deadline := time.Now().Add(20 * time.Second)
	for l.Dropped() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if l.Dropped() == 0 {
		t.Fatal("nothing dropped although the ring was never drained")
	}
	// the thread refills while Drain empties, so at least a full ring
	n := l.Drain(6, func(native.Sample) {})
	if n < native.RingSize {
		t.Fatalf("drained %d readings, want at least the full ring of %d", n, native.RingSize)
	}
}

func TestStopEndsALongWait(t *testing.T) {
	l, err := native.Start(native.Config{Funcs: nativetest.Funcs(), Handles: handles(t, 1), V1: []bool{false}, Period: time.Hour, Retry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { l.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waited for the hour-long period")
	}
	l.Stop() // twice is harmless
	if n := l.Drain(0, func(native.Sample) {}); n != 0 {
		t.Fatalf("Drain after Stop gave %d", n)
	}
}

func TestStartChecksConfig(t *testing.T) {
	if _, err := native.Start(native.Config{Funcs: nativetest.Funcs(), Handles: make([]uintptr, 2), V1: make([]bool, 1)}); err == nil {
		t.Error("mismatched handles and flags accepted")
	}
	if _, err := native.Start(native.Config{Handles: make([]uintptr, 1), V1: make([]bool, 1)}); err == nil {
		t.Error("a loop without any NVML function accepted")
	}
}

// Nothing in this test process loads libnvidia-ml.so.1, also on a machine
// with a driver: Lookup must say so rather than load it itself.
func TestLookupNeverLoadsTheLibrary(t *testing.T) {
	_, err := native.Lookup()
	if err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("Lookup: %v, want an error saying the library is not loaded", err)
	}
}
