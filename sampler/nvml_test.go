package sampler

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const gib = 1 << 30

// fakeGPU is a go-nvml mock device whose figures a test can change while
// the sampler runs.
type fakeGPU struct {
	dev      *mock.Device
	used     atomic.Uint64
	reserved atomic.Uint64
	memRet   atomic.Int32 // nvml.Return of the memory queries
	panicky  atomic.Bool

	mu       sync.Mutex
	compute  []nvml.ProcessInfo
	graphics []nvml.ProcessInfo
	cRet     nvml.Return
	gRet     nvml.Return
}

func newFakeGPU(i int, total uint64) *fakeGPU {
	g := &fakeGPU{}
	g.dev = &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return fmt.Sprintf("GPU-test-%d", i), nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			if g.panicky.Load() {
				panic("driver exploded")
			}
			if r := nvml.Return(g.memRet.Load()); r != nvml.SUCCESS {
				return nvml.Memory_v2{}, r
			}
			u, r := g.used.Load(), g.reserved.Load()
			return nvml.Memory_v2{Total: total, Used: u, Reserved: r, Free: total - u - r}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return append([]nvml.ProcessInfo(nil), g.compute...), g.cRet
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return append([]nvml.ProcessInfo(nil), g.graphics...), g.gRet
		},
	}
	return g
}

func (g *fakeGPU) setProcs(compute []nvml.ProcessInfo, cRet nvml.Return, graphics []nvml.ProcessInfo, gRet nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.compute, g.cRet, g.graphics, g.gRet = compute, cRet, graphics, gRet
}

// newLib is a go-nvml mock library holding the given devices.
func newLib(gpus ...*fakeGPU) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(gpus) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return gpus[i].dev, nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
}

func newStore() *store.Store { return store.New(store.DefaultOptions()) }

func mustInit(t *testing.T, n *NVML) {
	t.Helper()
	if err := n.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { n.Close() })
}

// waitFor polls cond until it holds or a generous deadline passes; the
// deadline only bounds a broken run, it is not a speed requirement.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func startRun(t *testing.T, n *NVML) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func TestInitEnumeratesDevices(t *testing.T) {
	a, b := newFakeGPU(0, 141*gib), newFakeGPU(1, 80*gib)
	st := newStore()
	n := NewNVML(newLib(a, b), ingest.New(st), NVMLOptions{})
	mustInit(t, n)
	if n.DeviceCount() != 2 {
		t.Fatalf("DeviceCount = %d, want 2", n.DeviceCount())
	}
	devs := st.Devices()
	want := []store.Device{
		{Index: 0, UUID: "GPU-test-0", Name: "NVIDIA H200", Total: 141 * gib, Source: "nvml"},
		{Index: 1, UUID: "GPU-test-1", Name: "NVIDIA H200", Total: 80 * gib, Source: "nvml"},
	}
	if len(devs) != len(want) {
		t.Fatalf("store has %d devices, want %d", len(devs), len(want))
	}
	for i := range want {
		if devs[i] != want[i] {
			t.Errorf("device %d = %+v, want %+v", i, devs[i], want[i])
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	n := NewNVML(newLib(), ingest.New(newStore()), NVMLOptions{})
	if o := n.Options(); o.Rate != 1000 || o.ProcRate != 10 {
		t.Errorf("defaults = %+v, want Rate 1000, ProcRate 10", o)
	}
	o := NVMLOptions{Rate: 250, ProcRate: -1}.withDefaults()
	if o.Rate != 250 || o.ProcRate != -1 {
		t.Errorf("explicit options changed: %+v", o)
	}
	if p := (NVMLOptions{Rate: 1000}).period(); p != time.Millisecond {
		t.Errorf("period at 1000/s = %v, want 1ms", p)
	}
}

// The dgxa100 mock server has GetMemoryInfo only; its devices answer
// GetMemoryInfo_v2 with FUNCTION_NOT_FOUND here, as an old driver would.
func TestDGXA100FallsBackToMemoryInfoV1(t *testing.T) {
	srv := dgxa100.New()
	for i, d := range srv.Devices {
		dev := d.(*dgxa100.Device)
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		dev.MemoryInfo.Used = uint64(i+1) * gib
	}
	st := newStore()
	n := NewNVML(srv, ingest.New(st), NVMLOptions{})
	mustInit(t, n)

	devs := st.Devices()
	if len(devs) != 8 {
		t.Fatalf("store has %d devices, want 8", len(devs))
	}
	for i, d := range devs {
		sd := srv.Devices[i].(*dgxa100.Device)
		if d.Name != sd.Config.Name || d.Name == "" {
			t.Errorf("device %d name %q, want %q", i, d.Name, sd.Config.Name)
		}
		if d.UUID != sd.UUID || d.Total != sd.MemoryInfo.Total || d.Total == 0 || d.Err != "" {
			t.Errorf("device %d = %+v, want UUID %s, total %d, no error", i, d, sd.UUID, sd.MemoryInfo.Total)
		}
	}
	for range 3 {
		n.tick(time.Now())
	}
	for i := range devs {
		used, _, ok := st.Latest(store.Key{Dev: i, Metric: store.NVMLUsed})
		res, _, _ := st.Latest(store.Key{Dev: i, Metric: store.NVMLReserved})
		if !ok || used != uint64(i+1)*gib || res != 0 {
			t.Errorf("device %d: used %d reserved %d (ok %v), want %d and 0", i, used, res, ok, uint64(i+1)*gib)
		}
		if got := st.Count(store.Key{Dev: i, Metric: store.NVMLUsed}); got != 3 {
			t.Errorf("device %d: %d samples, want 3", i, got)
		}
		sd := srv.Devices[i].(*dgxa100.Device)
		if c := len(sd.GetMemoryInfo_v2Calls()); c != 1 {
			t.Errorf("device %d: GetMemoryInfo_v2 called %d times, want once (then remembered)", i, c)
		}
	}
}

func TestOldDriverNeverCallsV2(t *testing.T) {
	g := newFakeGPU(0, 10*gib)
	g.dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 10 * gib, Used: 3 * gib, Free: 7 * gib}, nvml.SUCCESS
	}
	lib := newLib(g)
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
			if name == "nvmlDeviceGetMemoryInfo_v2" {
				return errors.New("undefined symbol")
			}
			return nil
		}}
	}
	st := newStore()
	n := NewNVML(lib, ingest.New(st), NVMLOptions{})
	mustInit(t, n)
	n.tick(time.Now())
	if c := len(g.dev.GetMemoryInfo_v2Calls()); c != 0 {
		t.Errorf("GetMemoryInfo_v2 called %d times on a library without it", c)
	}
	if used, _, _ := st.Latest(store.Key{Metric: store.NVMLUsed}); used != 3*gib {
		t.Errorf("used = %d, want %d", used, 3*gib)
	}
}

func TestSamplesArrive(t *testing.T) {
	a, b := newFakeGPU(0, 141*gib), newFakeGPU(1, 141*gib)
	a.used.Store(5 * gib)
	a.reserved.Store(512 << 20)
	b.used.Store(7 * gib)
	b.reserved.Store(256 << 20)
	st := newStore()
	n := NewNVML(newLib(a, b), ingest.New(st), NVMLOptions{})
	mustInit(t, n)

	before := time.Now().UnixNano()
	n.tick(time.Now())
	after := time.Now().UnixNano()
	check := func(dev int, used, res uint64) {
		t.Helper()
		u, tu, ok := st.Latest(store.Key{Dev: dev, Metric: store.NVMLUsed})
		r, _, _ := st.Latest(store.Key{Dev: dev, Metric: store.NVMLReserved})
		if !ok || u != used || r != res {
			t.Errorf("device %d: used %d reserved %d, want %d and %d", dev, u, r, used, res)
		}
		if tu < before || tu > after {
			t.Errorf("device %d: sample time %d outside [%d, %d]", dev, tu, before, after)
		}
	}
	check(0, 5*gib, 512<<20)
	check(1, 7*gib, 256<<20)

	a.used.Store(9 * gib)
	before = time.Now().UnixNano()
	n.tick(time.Now())
	after = time.Now().UnixNano()
	check(0, 9*gib, 512<<20)
	if c := st.Count(store.Key{Dev: 0, Metric: store.NVMLUsed}); c != 2 {
		t.Errorf("device 0 has %d samples, want 2", c)
	}
}

func TestMergeProcs(t *testing.T) {
	na := uint64(notAvailable)
	compute := []nvml.ProcessInfo{
		{Pid: 100, UsedGpuMemory: 1 * gib},
		{Pid: 200, UsedGpuMemory: na},
		{Pid: 400, UsedGpuMemory: na},
		{Pid: 500, UsedGpuMemory: 1 * gib, GpuInstanceId: 1}, // one pid on two MIG instances
		{Pid: 500, UsedGpuMemory: 2 * gib, GpuInstanceId: 2},
	}
	graphics := []nvml.ProcessInfo{
		{Pid: 100, UsedGpuMemory: 2 * gib},
		{Pid: 300, UsedGpuMemory: 5 << 20},
		{Pid: 200, UsedGpuMemory: na},
		{Pid: 400, UsedGpuMemory: 64 << 20},
	}
	got := mergeProcs(compute, graphics)
	want := []wire.Proc{
		{PID: 500, Used: 3 * gib},
		{PID: 100, Used: 2 * gib},
		{PID: 400, Used: 64 << 20},
		{PID: 300, Used: 5 << 20},
		{PID: 200, UsedUnknown: true}, // not available: unknown, listed last
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merged\n got %v\nwant %v", got, want)
	}
	// The same in the other order: the larger figure wins either way.
	if got2 := mergeProcs(graphics, compute); fmt.Sprint(got2) != fmt.Sprint(want) {
		t.Errorf("merge depends on order:\n got %v\nwant %v", got2, want)
	}
}

func TestProcsIntoStoreWithNames(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	self := os.Getpid()
	g.setProcs(
		[]nvml.ProcessInfo{{Pid: uint32(self), UsedGpuMemory: 3 * gib}, {Pid: 4242, UsedGpuMemory: notAvailable}},
		nvml.SUCCESS,
		[]nvml.ProcessInfo{{Pid: uint32(self), UsedGpuMemory: 1 * gib}},
		nvml.SUCCESS,
	)
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{})
	mustInit(t, n)
	// pid 4242 gets a /proc entry of its own; our own pid stays the real one.
	root := t.TempDir()
	writeProc(t, root, 4242, "trainer\n", "python\x00train.py\x00")
	if err := os.Symlink(filepath.Join("/proc", fmt.Sprint(self)), filepath.Join(root, fmt.Sprint(self))); err != nil {
		t.Fatal(err)
	}
	n.names = newProcNames(root)

	before := time.Now().UnixNano()
	n.refreshProcs()
	procs, at := st.Procs(0)
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	selfName := strings.TrimSpace(string(comm))
	want := []wire.Proc{{PID: self, Name: selfName, Used: 3 * gib}, {PID: 4242, Name: "trainer", UsedUnknown: true}}
	if fmt.Sprint(procs) != fmt.Sprint(want) {
		t.Errorf("procs\n got %v\nwant %v", procs, want)
	}
	if at < before {
		t.Errorf("procs time %d before the refresh (%d)", at, before)
	}
	if selfName == "" || selfName == unknownName {
		t.Errorf("own process name %q", selfName)
	}
}

func TestProcsNotSupportedIsNoData(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	st := newStore()
	book := logbook.New()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Log: book.Add})
	mustInit(t, n)

	g.setProcs(nil, nvml.ERROR_NOT_SUPPORTED, nil, nvml.ERROR_NOT_SUPPORTED)
	n.refreshProcs()
	if procs, at := st.Procs(0); len(procs) != 0 || at != 0 {
		t.Errorf("with no process data: procs %v at %d, want nothing stored", procs, at)
	}
	if d := st.Devices()[0]; d.Err != "" {
		t.Errorf("NOT_SUPPORTED shown as a device error: %q", d.Err)
	}
	if logs := book.Lines(); len(logs) != 0 {
		t.Errorf("NOT_SUPPORTED logged: %q", logs)
	}

	// One query unsupported, the other answers: its answer is the list.
	g.setProcs(nil, nvml.ERROR_NOT_SUPPORTED, []nvml.ProcessInfo{{Pid: 77, UsedGpuMemory: gib}}, nvml.SUCCESS)
	n.refreshProcs()
	if procs, at := st.Procs(0); len(procs) != 1 || procs[0].PID != 77 || procs[0].Used != gib || at == 0 {
		t.Errorf("graphics-only procs %v at %d, want pid 77 with 1 GiB", procs, at)
	}
}

func TestProcsErrorLoggedOnce(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	st := newStore()
	book := logbook.New()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Log: book.Add})
	mustInit(t, n)
	g.setProcs([]nvml.ProcessInfo{{Pid: 1, UsedGpuMemory: gib}}, nvml.SUCCESS, nil, nvml.SUCCESS)
	n.refreshProcs()
	_, at := st.Procs(0)

	g.setProcs(nil, nvml.ERROR_GPU_IS_LOST, nil, nvml.ERROR_GPU_IS_LOST)
	for range 5 {
		n.refreshProcs()
	}
	logs := book.Lines()
	if len(logs) != 1 || !strings.Contains(logs[0], "GPU 0") || !strings.Contains(logs[0], "GPU is lost") {
		t.Errorf("logs %q, want one line naming GPU 0 and \"GPU is lost\"", logs)
	}
	if procs, at2 := st.Procs(0); at2 != at || len(procs) != 1 {
		t.Errorf("failed query replaced the list: %v at %d", procs, at2)
	}

	g.setProcs(nil, nvml.SUCCESS, nil, nvml.SUCCESS)
	n.refreshProcs()
	logs = book.Lines()
	if len(logs) != 2 || !strings.Contains(logs[1], "again") {
		t.Errorf("after recovery logs %q, want a second line saying so", logs)
	}
	if procs, at2 := st.Procs(0); len(procs) != 0 || at2 == at {
		t.Errorf("after recovery procs %v at %d, want an empty fresh list", procs, at2)
	}
}

func writeProc(t *testing.T, root string, pid int, comm, cmdline string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if comm != "" {
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if cmdline != "" {
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProcessNames(t *testing.T) {
	// Our own pid against the real /proc.
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(comm))
	if got := readProcName("/proc", os.Getpid()); got != want && !strings.HasPrefix(got, want) {
		t.Errorf("own name %q, want %q", got, want)
	}

	root := t.TempDir()
	writeProc(t, root, 10, "python3\n", "/usr/bin/python3\x00train.py\x00")
	writeProc(t, root, 11, "", "/opt/conda/bin/torchrun\x00--nproc=8\x00")
	writeProc(t, root, 12, "", "")
	writeProc(t, root, 13, "pt_main_thread\n", "")
	writeProc(t, root, 14, "very_long_train\n", "/home/u/very_long_training_script\x00")
	writeProc(t, root, 15, "very_long_train\n", "python\x00")
	for _, c := range []struct {
		pid  int
		want string
	}{
		{10, "python3"},
		{11, "torchrun"},                  // no comm: argv[0]'s basename
		{12, unknownName},                 // nothing readable
		{13, "pt_main_thread"},            // comm only
		{14, "very_long_training_script"}, // comm cut at 15 characters, completed from argv[0]
		{15, "very_long_train"},           // argv[0] is something else: keep comm
		{99, unknownName},                 // no such process
	} {
		if got := readProcName(root, c.pid); got != c.want {
			t.Errorf("pid %d: name %q, want %q", c.pid, got, c.want)
		}
	}
}

func TestProcessNameCache(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, "first\n", "")
	c := newProcNames(root)
	c.begin()
	if got := c.lookup(10); got != "first" {
		t.Fatalf("name %q, want first", got)
	}
	c.sweep()
	writeProc(t, root, 10, "second\n", "")
	c.begin()
	if got := c.lookup(10); got != "first" {
		t.Errorf("cached name %q, want first (read once per pid)", got)
	}
	c.sweep()
	// A round without pid 10: it is gone, and a recycled pid is read again.
	c.begin()
	c.sweep()
	c.begin()
	if got := c.lookup(10); got != "second" {
		t.Errorf("after the pid went away: %q, want second", got)
	}
	// Unreadable names are not cached: the entry may appear a moment later.
	c.begin()
	if got := c.lookup(20); got != unknownName {
		t.Errorf("missing pid: %q", got)
	}
	writeProc(t, root, 20, "late\n", "")
	if got := c.lookup(20); got != "late" {
		t.Errorf("pid 20 after its entry appeared: %q, want late", got)
	}
}

func TestDeviceLostWhileOthersSample(t *testing.T) {
	a, b := newFakeGPU(0, 141*gib), newFakeGPU(1, 141*gib)
	a.used.Store(gib)
	b.used.Store(2 * gib)
	st := newStore()
	n := NewNVML(newLib(a, b), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: 20})
	mustInit(t, n)
	stop := startRun(t, n)
	count := func(dev int) uint64 { return st.Count(store.Key{Dev: dev, Metric: store.NVMLUsed}) }
	waitFor(t, "samples from both devices", func() bool { return count(0) > 10 && count(1) > 10 })

	b.memRet.Store(int32(nvml.ERROR_GPU_IS_LOST))
	waitFor(t, "device 1 error", func() bool { return st.Devices()[1].Err != "" })
	d1 := st.Devices()[1]
	if !strings.Contains(d1.Err, "GPU is lost") || !strings.Contains(d1.Err, "ERROR_GPU_IS_LOST") {
		t.Errorf("device 1 error %q, want human text and the NVML error", d1.Err)
	}
	if st.Devices()[0].Err != "" {
		t.Errorf("device 0 shows an error: %q", st.Devices()[0].Err)
	}
	lost1, lost0 := count(1), count(0)
	waitFor(t, "device 0 to keep sampling", func() bool { return count(0) > lost0+200 })
	if c := count(1); c != lost1 {
		t.Errorf("lost device 1 gained %d samples", c-lost1)
	}
	// While lost, device 1 is retried about every 100 ms, not at 1 kHz.
	calls := len(b.dev.GetMemoryInfo_v2Calls())
	time.Sleep(300 * time.Millisecond)
	if retries := len(b.dev.GetMemoryInfo_v2Calls()) - calls; retries > 20 {
		t.Errorf("lost device retried %d times in 300 ms", retries)
	}

	b.memRet.Store(int32(nvml.SUCCESS))
	b.used.Store(3 * gib)
	waitFor(t, "device 1 recovery", func() bool { return st.Devices()[1].Err == "" && count(1) > lost1+10 })
	if v, _, _ := st.Latest(store.Key{Dev: 1, Metric: store.NVMLUsed}); v != 3*gib {
		t.Errorf("device 1 used after recovery %d, want %d", v, 3*gib)
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestHandleErrorAtInit(t *testing.T) {
	a, b := newFakeGPU(0, 141*gib), newFakeGPU(1, 141*gib)
	a.used.Store(gib)
	lib := newLib(a, b)
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return a.dev, nvml.SUCCESS
	}
	st := newStore()
	n := NewNVML(lib, ingest.New(st), NVMLOptions{})
	mustInit(t, n)
	devs := st.Devices()
	if len(devs) != 2 || devs[1].Name != "GPU 1" || !strings.Contains(devs[1].Err, "GPU is lost") {
		t.Fatalf("devices %+v, want GPU 1 registered with its error", devs)
	}
	n.tick(time.Now())
	n.refreshProcs()
	if c := st.Count(store.Key{Dev: 0, Metric: store.NVMLUsed}); c != 1 {
		t.Errorf("device 0 has %d samples, want 1", c)
	}
}

func TestMemoryErrorAtInitClearsOnRecovery(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	g.memRet.Store(int32(nvml.ERROR_UNKNOWN))
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{})
	mustInit(t, n)
	if e := st.Devices()[0].Err; !strings.Contains(e, "unknown") {
		t.Fatalf("device error %q, want the unknown error shown", e)
	}
	g.memRet.Store(int32(nvml.SUCCESS))
	n.tick(time.Now()) // still inside the retry delay: not tried
	if e := st.Devices()[0].Err; e == "" {
		t.Fatalf("error cleared without a successful read")
	}
	n.tick(time.Now().Add(retryEvery))
	if e := st.Devices()[0].Err; e != "" {
		t.Errorf("device error %q after a good read, want cleared", e)
	}
}

func TestNoDriver(t *testing.T) {
	for _, r := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		lib := newLib()
		lib.InitFunc = func() nvml.Return { return r }
		n := NewNVML(lib, ingest.New(newStore()), NVMLOptions{})
		err := n.Init()
		if !errors.Is(err, ErrNoDriver) {
			t.Fatalf("%v: Init error %v, want ErrNoDriver", r, err)
		}
		for _, s := range []string{"libnvidia-ml.so", "gputop --demo", "gputop --replay FILE"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%v: message %q lacks %q", r, err, s)
			}
		}
		if err := n.Run(context.Background()); err == nil {
			t.Errorf("Run after a failed Init returned nil")
		}
		if err := n.Close(); err != nil || len(lib.ShutdownCalls()) != 0 {
			t.Errorf("Close after a failed Init: %v, %d Shutdown calls", err, len(lib.ShutdownCalls()))
		}
	}
}

func TestOtherInitErrors(t *testing.T) {
	lib := newLib()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_NO_PERMISSION }
	err := NewNVML(lib, ingest.New(newStore()), NVMLOptions{}).Init()
	if err == nil || errors.Is(err, ErrNoDriver) || !errors.Is(err, nvml.ERROR_NO_PERMISSION) {
		t.Fatalf("Init error %v, want a NO_PERMISSION error that is not ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "no permission") || !strings.Contains(err.Error(), "NVML") {
		t.Errorf("message %q is not clear", err)
	}

	lib = newLib()
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	err = NewNVML(lib, ingest.New(newStore()), NVMLOptions{}).Init()
	if err == nil || !strings.Contains(err.Error(), "DeviceGetCount") {
		t.Errorf("Init error %v, want one naming DeviceGetCount", err)
	}
	if len(lib.ShutdownCalls()) != 1 {
		t.Errorf("NVML not shut down after a failed Init (%d calls)", len(lib.ShutdownCalls()))
	}
}

// The real library: without a driver (CI) Init must say so through
// ErrNoDriver; with one, it must enumerate, sample from the native thread
// and close cleanly.
func TestRealLibrary(t *testing.T) {
	st := newStore()
	book := logbook.New()
	n := NewNVML(nvml.New(), ingest.New(st), NVMLOptions{Thread: true, Log: book.Add})
	err := n.Init()
	if err != nil {
		var e *Error
		if !errors.Is(err, ErrNoDriver) && !errors.As(err, &e) {
			t.Fatalf("Init error %v is neither ErrNoDriver nor an NVML error", err)
		}
		if errors.Is(err, ErrNoDriver) && !strings.Contains(err.Error(), "libnvidia-ml.so") {
			t.Errorf("message %q does not name the library", err)
		}
		return
	}
	defer n.Close()
	if got := len(st.Devices()); got != n.DeviceCount() {
		t.Errorf("store has %d devices, NVML %d", got, n.DeviceCount())
	}
	stop := startRun(t, n)
	waitFor(t, "rate reports from every GPU", func() bool {
		for _, d := range st.Devices() {
			if d.Rate == 0 {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, l := range book.Lines() {
		if strings.Contains(l, "instead of a native thread") {
			t.Errorf("the native thread was not used: %s", l)
		}
	}
	for _, d := range st.Devices() {
		used, _, ok := st.Latest(store.Key{Dev: d.Index, Metric: store.NVMLUsed})
		procs, at := st.Procs(d.Index)
		t.Logf("GPU %d %s %s: used %d of %d, %.0f samples/s, %d processes %v (at %d), error %q",
			d.Index, d.Name, d.UUID, used, d.Total, d.Rate, len(procs), procs, at, d.Err)
		if d.Err != "" || !ok || d.Total == 0 || used > d.Total || d.UUID == "" {
			t.Errorf("GPU %d: %+v, used %d (ok %v)", d.Index, d, used, ok)
		}
	}
	if err := n.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestCloseShutsDownOnce(t *testing.T) {
	lib := newLib(newFakeGPU(0, gib))
	n := NewNVML(lib, ingest.New(newStore()), NVMLOptions{})
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if c := len(lib.ShutdownCalls()); c != 1 {
		t.Errorf("Shutdown called %d times, want 1", c)
	}
	lib.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
	n = NewNVML(lib, ingest.New(newStore()), NVMLOptions{})
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); !errors.Is(err, nvml.ERROR_UNKNOWN) {
		t.Errorf("Close error %v, want the Shutdown error", err)
	}
}

func TestPanicEndsRunWithError(t *testing.T) {
	g := newFakeGPU(0, gib)
	n := NewNVML(newLib(g), ingest.New(newStore()), NVMLOptions{ProcRate: -1})
	mustInit(t, n)
	g.panicky.Store(true)
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "driver exploded") {
			t.Errorf("Run error %v, want the panic as an error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after a panic")
	}
}

func TestRateReported(t *testing.T) {
	const rate = 500
	g := newFakeGPU(0, gib)
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Rate: rate, ProcRate: -1})
	mustInit(t, n)
	stop := startRun(t, n)
	waitFor(t, "a rate report", func() bool { return st.Devices()[0].Rate > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	hz := st.Devices()[0].Rate
	// The pacer never runs ahead of its deadlines, so the upper bound is
	// firm. The lower bound is deliberately loose: a loaded 2-core machine
	// under -race still reaches a fifth of the target; the real goal
	// (>= 990/s at 1000/s) is measured by BenchmarkAchievedRate.
	if hz > rate*1.05 || hz < rate/5 {
		t.Errorf("reported rate %.1f/s, want about %d/s", hz, rate)
	}
}

// The pacer, driven by a simulated clock: wake-ups late by up to 80% of a
// period and a per-tick cost still give the full rate, and a long stall
// brings a short catch-up, not a burst.
func TestPacerKeepsRate(t *testing.T) {
	const period = time.Millisecond
	rng := rand.New(rand.NewSource(1))
	now := time.Unix(1000, 0)
	start := now
	p := newPacer(period, now)
	ticks, backToBack, maxRun := 0, 0, 0
	for now.Sub(start) < 10*time.Second {
		ticks++
		now = now.Add(20 * time.Microsecond) // the tick's own cost
		if now.Sub(start) > 5*time.Second && now.Sub(start) < 5*time.Second+period {
			now = now.Add(50 * time.Millisecond) // a stall
		}
		d := p.wait(now)
		if d > 0 {
			backToBack = 0
			now = now.Add(d + time.Duration(rng.Int63n(int64(period)*8/10)))
		} else {
			backToBack++
			maxRun = max(maxRun, backToBack)
		}
	}
	// 10 s at 1 kHz less the ~45 ms the stall gives up.
	if ticks < 9900 || ticks > 10001 {
		t.Errorf("%d ticks in 10 s at 1 kHz, want 9900..10001", ticks)
	}
	if maxRun > maxLagTicks+1 {
		t.Errorf("%d back-to-back ticks after a stall, want at most %d", maxRun, maxLagTicks+1)
	}
}

// smallStore fills up at once, so what is measured is the steady state.
func smallStore() *store.Store {
	return store.New(store.Options{RawCapacity: 64, Tiers: []store.TierSpec{{Width: time.Microsecond, Buckets: 4}}})
}

func TestTickDoesNotAllocate(t *testing.T) {
	a, b := newFakeGPU(0, gib), newFakeGPU(1, gib)
	n := NewNVML(newLib(a, b), ingest.New(smallStore()), NVMLOptions{})
	mustInit(t, n)
	for range 1000 {
		n.tick(time.Now())
	}
	if allocs := testing.AllocsPerRun(1000, func() { n.tick(time.Now()) }); allocs != 0 {
		t.Errorf("tick allocates %.1f times", allocs)
	}
}

func BenchmarkSampleTick(b *testing.B) {
	for _, devs := range []int{1, 8} {
		b.Run(fmt.Sprintf("gpus=%d", devs), func(b *testing.B) {
			gpus := make([]*fakeGPU, devs)
			for i := range gpus {
				gpus[i] = newFakeGPU(i, 141*gib)
				gpus[i].used.Store(uint64(i) * gib)
			}
			n := NewNVML(newLib(gpus...), ingest.New(smallStore()), NVMLOptions{})
			if err := n.Init(); err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			for range 1000 {
				n.tick(time.Now())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n.tick(time.Now())
			}
		})
	}
}

// BenchmarkAchievedRate runs the real loop at 1000/s for two seconds per
// iteration and reports the achieved rate (goal: >= 990/s) and the CPU the
// whole process used meanwhile, in percent of one core.
func BenchmarkAchievedRate(b *testing.B) {
	g := newFakeGPU(0, gib)
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: -1})
	if err := n.Init(); err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	var total uint64
	var elapsed time.Duration
	cpu0 := cpuTime(b)
	for b.Loop() {
		before := st.Count(store.Key{Metric: store.NVMLUsed})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		start := time.Now()
		if err := n.Run(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		cancel()
		total += st.Count(store.Key{Metric: store.NVMLUsed}) - before
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "samples/s")
	b.ReportMetric(100*(cpuTime(b)-cpu0).Seconds()/elapsed.Seconds(), "cpu%")
	b.ReportMetric(st.Devices()[0].Rate, "reported/s")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRealNVML measures one tick and the achieved rate against the
// machine's own driver; it needs a GPU.
func BenchmarkRealNVML(b *testing.B) {
	n := NewNVML(nvml.New(), ingest.New(smallStore()), NVMLOptions{})
	if err := n.Init(); err != nil {
		b.Skipf("no usable NVML here: %v", err)
	}
	defer n.Close()
	for range 1000 { // fill the small store, so its growth is not measured
		n.tick(time.Now())
	}
	b.Run("tick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.tick(time.Now())
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n.DeviceCount()), "ns/gpu")
	})
	b.Run("procs", func(b *testing.B) {
		for b.Loop() {
			n.refreshProcs()
		}
	})
	b.Run("rate", func(b *testing.B) {
		st := newStore()
		n := NewNVML(nvml.New(), ingest.New(st), NVMLOptions{})
		if err := n.Init(); err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		var total uint64
		var elapsed time.Duration
		key := store.Key{Metric: store.NVMLUsed}
		cpu0 := cpuTime(b)
		for b.Loop() {
			before := st.Count(key)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			start := time.Now()
			if err := n.Run(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
			cancel()
			total += st.Count(key) - before
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "samples/s")
		b.ReportMetric(100*(cpuTime(b)-cpu0).Seconds()/elapsed.Seconds(), "cpu%")
		b.ReportMetric(st.Devices()[0].Rate, "reported/s")
	})
}

func TestNameAndUUIDErrorsAreLogged(t *testing.T) {
	g := newFakeGPU(0, gib)
	g.dev.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NO_PERMISSION }
	g.dev.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	st := newStore()
	book := logbook.New()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Log: book.Add})
	mustInit(t, n)
	d := st.Devices()[0]
	if d.Name != "GPU 0" || d.UUID != "" || d.Total != gib || d.Err != "" {
		t.Errorf("device %+v, want a sampled \"GPU 0\" without UUID", d)
	}
	logs := strings.Join(book.Lines(), "\n")
	if !strings.Contains(logs, "GetName: no permission") || !strings.Contains(logs, "GetUUID") {
		t.Errorf("logs %q, want the GetName and GetUUID errors", logs)
	}
}

// Sampled from Go, the process lists follow the memory the same way: once a
// second while the GPU's used memory stays put, at the next tick of
// --proc-rate after it moves.
func TestProcessListsFollowTheMemory(t *testing.T) {
	g := newFakeGPU(0, 141*gib)
	g.used.Store(5 * gib)
	g.setProcs([]nvml.ProcessInfo{{Pid: 77, UsedGpuMemory: gib}}, nvml.SUCCESS, nil, nvml.ERROR_NOT_SUPPORTED)
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{Rate: 1000, ProcRate: 20})
	mustInit(t, n)
	lists := func() int { return len(g.dev.GetComputeRunningProcessesCalls()) }
	start := time.Now()
	startRun(t, n)
	waitFor(t, "the first process list", func() bool { return lists() >= 1 })
	time.Sleep(1500 * time.Millisecond)
	if c, most := lists(), int(time.Since(start)/procsIdle)+2; c > most {
		t.Errorf("%d process lists in %v of steady memory at --proc-rate 20, want at most %d", c, time.Since(start).Round(time.Millisecond), most)
	}
	before := lists()
	g.used.Store(6 * gib)
	moved := time.Now()
	waitFor(t, "a process list after the memory moved", func() bool { return lists() > before })
	if d := time.Since(moved); d >= procsIdle {
		t.Errorf("the process list came %v after the memory moved, as if it had not", d.Round(time.Millisecond))
	}
	if procs, _ := st.Procs(0); len(procs) != 1 || procs[0].PID != 77 {
		t.Errorf("process list %v, want pid 77", procs)
	}
}
