package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gputop/gputop/wire"
)

// mockGPU is go-nvml's mock library with one H200: 80 GiB, 10 GiB used,
// 1 GiB reserved by the driver, our own process on it using 6 GiB.
func mockGPU() *mock.Interface {
	const gib = 1 << 30
	dev := &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-mock-0", nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 80 * gib, Used: 10 * gib, Reserved: gib, Free: 69 * gib}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 6 * gib}}, nvml.SUCCESS
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
	}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i != 0 {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return dev, nvml.SUCCESS
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
}

// No gputop listening: the report is one NVML reading (go-nvml's mock
// here), its figures the driver's, and the lists only a running gputop
// has are empty with the reason.
func TestStatusFromOneNVMLReading(t *testing.T) {
	var stderr bytes.Buffer
	rep, code := statusReport(filepath.Join(t.TempDir(), "none.sock"), mockGPU(), &stderr)
	if code != statusOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, _ := json.Marshal(rep)
	const gib = 1 << 30
	if rep.Source != wire.StatusFromNVML || len(rep.Devices) != 1 || len(rep.Processes) != 1 {
		t.Fatalf("%s", b)
	}
	d, p := rep.Devices[0], rep.Processes[0]
	if d.Name != "NVIDIA H200" || d.UUID != "GPU-mock-0" || d.From != "nvml" || *d.Total != 80*gib || *d.Used != 10*gib || *d.Free != 69*gib {
		t.Errorf("device: %s", b)
	}
	if p.PID != os.Getpid() || *p.Used != 6*gib || p.Name == "" {
		t.Errorf("process: %s", b)
	}
	if len(rep.Agents) != 0 || rep.AgentsWhy == "" || rep.RowsWhy == "" || rep.OOMsWhy == "" {
		t.Errorf("the lists a running gputop has: %s", b)
	}
}

// No gputop and no NVML: exit 1, and the message names both.
func TestStatusWithNothingToReportFrom(t *testing.T) {
	lib := mockGPU()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	var stderr bytes.Buffer
	_, code := statusReport(filepath.Join(t.TempDir(), "none.sock"), lib, &stderr)
	if code != statusNoSource || !strings.Contains(stderr.String(), "no gputop is running") || !strings.Contains(stderr.String(), "libnvidia-ml.so") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
