package sampler

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/sampler/native/nativetest"
	"github.com/gputop/gputop/store"
)

// The native thread with C stand-ins for NVML's memory queries (go-nvml's
// mock cannot be called from C); names, UUIDs and processes still come
// from the go-nvml mock.
func threadNVML(t *testing.T, st *store.Store, book *logbook.Book, gpus ...*fakeGPU) *NVML {
	t.Helper()
	f := nativetest.Funcs()
	n := NewNVML(newLib(gpus...), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: -1, Thread: true, Log: book.Add})
	n.opt.funcs = &f
	mustInit(t, n)
	return n
}

func TestThreadSamplesIntoStore(t *testing.T) {
	nativetest.Set(0, 5*gib, 512<<20, 0, 0)
	nativetest.Set(1, 7*gib, 0, 0, 0)
	st := newStore()
	book := logbook.New()
	n := threadNVML(t, st, book, newFakeGPU(0, 141*gib), newFakeGPU(1, 141*gib))
	stop := startRun(t, n)
	count := func(dev int) uint64 { return st.Count(store.Key{Dev: dev, Metric: store.NVMLUsed}) }
	waitFor(t, "samples from both devices", func() bool { return count(0) > 50 && count(1) > 50 })
	if v, _, _ := st.Latest(store.Key{Dev: 0, Metric: store.NVMLUsed}); v != 5*gib {
		t.Errorf("device 0 used %d, want %d", v, 5*gib)
	}
	if v, _, _ := st.Latest(store.Key{Dev: 0, Metric: store.NVMLReserved}); v != 512<<20 {
		t.Errorf("device 0 reserved %d, want %d", v, 512<<20)
	}
	waitFor(t, "a rate report", func() bool { return st.Devices()[0].Rate > 0 })
	for _, l := range book.Lines() {
		if strings.Contains(l, "instead of a native thread") {
			t.Fatalf("fell back to Go: %s", l)
		}
	}

	// a lost GPU shows its error while the other keeps sampling, and
	// recovers by itself
	nativetest.Set(1, 7*gib, 0, int(nvml.ERROR_GPU_IS_LOST), int(nvml.ERROR_GPU_IS_LOST))
	waitFor(t, "device 1 error", func() bool { return strings.Contains(st.Devices()[1].Err, "GPU is lost") })
	if st.Devices()[0].Err != "" {
		t.Errorf("device 0 shows an error: %q", st.Devices()[0].Err)
	}
	c0 := count(0)
	waitFor(t, "device 0 to keep sampling", func() bool { return count(0) > c0+100 })
	nativetest.Set(1, 8*gib, 0, 0, 0)
	waitFor(t, "device 1 recovery", func() bool {
		v, _, _ := st.Latest(store.Key{Dev: 1, Metric: store.NVMLUsed})
		return st.Devices()[1].Err == "" && v == 8*gib
	})
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}

	// the thread has stopped: nothing more arrives
	c0 = count(0)
	time.Sleep(50 * time.Millisecond)
	if c := count(0); c != c0 {
		t.Errorf("%d samples after Run returned", c-c0)
	}
}

// Where the thread cannot have a GPU's handle, a goroutine samples and the
// log says why.
func TestThreadFallsBackToGo(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	g.used.Store(3 * gib)
	st := newStore()
	f := nativetest.FailingHandles()
	book := logbook.New()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: -1, Thread: true, Log: book.Add})
	n.opt.funcs = &f
	mustInit(t, n)
	stop := startRun(t, n)
	waitFor(t, "samples", func() bool { return st.Count(store.Key{Metric: store.NVMLUsed}) > 20 })
	if v, _, _ := st.Latest(store.Key{Metric: store.NVMLUsed}); v != 3*gib {
		t.Errorf("used %d, want %d (from the go-nvml mock)", v, 3*gib)
	}
	found := false
	for _, l := range book.Lines() {
		found = found || strings.Contains(l, "sampling from Go instead of a native thread: GPU 0: unknown NVML error")
	}
	if !found {
		t.Errorf("no log line saying why; logs: %q", book.Lines())
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// A unified-memory GPU beside an ordinary one under the native thread: the
// thread samples the ordinary one; the unified one is read from Go, at
// most every systemEvery, from the meminfo file, with no fallback.
func TestThreadLeavesUnifiedMemoryToGo(t *testing.T) {
	nativetest.Set(0, 5*gib, 0, 0, 0)
	spark := newFakeGPU(1, 0)
	spark.memRet.Store(int32(nvml.ERROR_NOT_SUPPORTED))
	spark.dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	st := newStore()
	book := logbook.New()
	f := nativetest.Funcs()
	n := NewNVML(newLib(newFakeGPU(0, 141*gib), spark), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: -1, Thread: true, Log: book.Add})
	n.opt.funcs = &f
	n.meminfo = writeMeminfo(t, 128*gib, 120*gib)
	mustInit(t, n)
	start := time.Now()
	stop := startRun(t, n)
	count := func(dev int) uint64 { return st.Count(store.Key{Dev: dev, Metric: store.NVMLUsed}) }
	waitFor(t, "samples of both", func() bool { return count(0) > 200 && count(1) >= 2 })
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
	ran := time.Since(start)
	if v, _, _ := st.Latest(store.Key{Dev: 1, Metric: store.NVMLUsed}); v != 8*gib || st.Devices()[1].Memory != "system" {
		t.Errorf("device 1: used %d (memory %q), want the system's 8 GiB", v, st.Devices()[1].Memory)
	}
	// at most one reading per systemEvery, and one at the start
	if c, most := count(1), uint64(ran/systemEvery)+1; c > most {
		t.Errorf("%d readings of the system's memory in %v, want at most %d", c, ran, most)
	}
	for _, l := range book.Lines() {
		if strings.Contains(l, "instead of a native thread") {
			t.Errorf("fell back to Go: %s", l)
		}
	}
}

// With the native thread, process lists are refreshed on the drain's ticks
// (no goroutine of their own), once a second while the GPU's memory stays
// put and at the next tick after it moves; a panicking process query ends
// Run with its error, as the goroutine's did.
func TestThreadRefreshesProcessListsWhenMemoryMoves(t *testing.T) {
	nativetest.Set(0, 5*gib, 0, 0, 0)
	st := newStore()
	book := logbook.New()
	g := newFakeGPU(0, 141*gib)
	g.setProcs([]nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: gib}}, nvml.SUCCESS, nil, nvml.ERROR_NOT_SUPPORTED)
	var calls atomic.Int64
	var explode atomic.Bool
	query := g.dev.GetComputeRunningProcessesFunc
	g.dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		calls.Add(1)
		if explode.Load() {
			panic("driver exploded")
		}
		return query()
	}
	n := threadNVML(t, st, book, g)
	n.opt.ProcRate = 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- n.Run(ctx) }()
	waitFor(t, "the first process list", func() bool { return calls.Load() >= 1 })
	if procs, _ := st.Procs(0); len(procs) != 1 || procs[0].PID != 4242 {
		t.Errorf("process list %v, want pid 4242", procs)
	}
	// memory steady: about one list a second, not ten (one more at the
	// start: the first list comes before the first reading, which then
	// counts as a move)
	time.Sleep(1500 * time.Millisecond)
	if c, most := calls.Load(), int64(time.Since(start)/procsIdle)+2; c > most {
		t.Errorf("%d process lists in %v of steady memory, want at most %d", c, time.Since(start).Round(time.Millisecond), most)
	}
	// memory moves: a list at the next ticks, well before the second is up
	for i := range 3 {
		before := calls.Load()
		nativetest.Set(0, uint64(6+i)*gib, 0, 0, 0)
		moved := time.Now()
		waitFor(t, "a process list after the memory moved", func() bool { return calls.Load() > before })
		if d := time.Since(moved); d >= procsIdle {
			t.Errorf("the process list came %v after the memory moved, as if it had not", d.Round(time.Millisecond))
		}
		time.Sleep(150 * time.Millisecond) // past procEvery
	}
	explode.Store(true)
	nativetest.Set(0, 9*gib, 0, 0, 0)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "process list") || !strings.Contains(err.Error(), "driver exploded") {
		t.Errorf("Run after a panicking process query: %v, want the process list's error", err)
	}
}
