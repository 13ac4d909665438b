package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// memTotal is this machine's MemTotal, from /proc/meminfo.
func memTotal(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// A unified-memory GPU (GB10) whose NVML memory queries answer
// NOT_SUPPORTED (go-nvml's mock), sampled by the real sampler into a
// recording made by the real writer, then replayed by the real binary in
// tmux: the header shows the system's memory (this machine's MemTotal)
// labelled as such in the header and the chart's legend, at 80 and 120
// columns.
func TestUnifiedMemoryShown(t *testing.T) {
	dev := &mock.Device{
		GetNameFunc:          func() (string, nvml.Return) { return "NVIDIA GB10", nvml.SUCCESS },
		GetUUIDFunc:          func() (string, nvml.Return) { return "GPU-spark", nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED },
		GetMemoryInfoFunc:    func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 3 << 30}}, nvml.SUCCESS
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
	}
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
	rec := filepath.Join(t.TempDir(), "spark.jsonl")
	w, err := recording.Create(rec, wire.Recording{Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Tool: "test", RateHz: 1000})
	if err != nil {
		t.Fatal(err)
	}
	in := ingest.New(store.New(store.DefaultOptions()))
	in.SetTap(w)
	n := sampler.NewNVML(lib, in, sampler.NVMLOptions{Rate: 1000, ProcRate: 10})
	if err := n.Init(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(rec)
	if !strings.Contains(string(data), `"memory":"system"`) {
		t.Fatalf("the recording's device frame lacks \"memory\":\"system\":\n%.600s", data)
	}

	total := units.Bytes(memTotal(t))
	for _, c := range []struct {
		w, h int
		want string
	}{{80, 24, "system mem"}, {120, 30, "system memory (unified)"}} {
		tm := startTerm(t, c.w, c.h, "--replay", rec)
		scr := tm.waitFor(c.want)
		line := ""
		for _, l := range strings.Split(scr, "\n") {
			if strings.Contains(l, "GPU 0") && strings.Contains(l, c.want) {
				line = l
			}
		}
		if !strings.Contains(line, "/ "+total) || !strings.Contains(line, "mem ") {
			t.Errorf("%dx%d: header line %q, want the system's %s total beside %q:\n%s", c.w, c.h, line, total, c.want, scr)
		}
		if c.w >= 120 && !strings.Contains(scr, "system memory used (unified: /proc/meminfo)") {
			t.Errorf("%dx%d: the chart's legend does not name the system's memory:\n%s", c.w, c.h, scr)
		}
		if strings.Contains(scr, "not supported") {
			t.Errorf("%dx%d: the device shows NVML's not supported as an error:\n%s", c.w, c.h, scr)
		}
	}
}
