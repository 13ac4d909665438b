package sampler

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func writeMeminfo(t *testing.T, total, avail uint64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "meminfo")
	s := "MemTotal:       " + itoa(total>>10) + " kB\nMemFree:          123456 kB\nMemAvailable:   " + itoa(avail>>10) + " kB\nBuffers:  1 kB\n"
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// A unified-memory GPU (GH200, GB10) answers NVML's memory queries, v2
// and v1, with NOT_SUPPORTED: the device is then the system's memory
// (MemTotal, MemTotal − MemAvailable used), labelled so in the store and
// the recording's device frame, read from Go (never the native thread)
// at most every systemEvery, and NVML's process list still counts.
func TestUnifiedMemoryReadsTheSystem(t *testing.T) {
	for _, how := range []string{"not supported", "total 0"} {
		t.Run(how, func(t *testing.T) {
			g := newFakeGPU(0, 0)
			if how == "not supported" {
				g.memRet.Store(int32(nvml.ERROR_NOT_SUPPORTED))
				g.dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
			}
			g.setProcs([]nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 3 * gib}}, nvml.SUCCESS, nil, nvml.SUCCESS)
			st := newStore()
			in := ingest.New(st)
			var frames []wire.Device
			in.SetTap(tapFunc(func(f wire.Frame) {
				if d, ok := f.(wire.Device); ok {
					frames = append(frames, d)
				}
			}))
			book := logbook.New()
			n := NewNVML(newLib(g), in, NVMLOptions{Log: book.Add})
			n.meminfo = writeMeminfo(t, 128*gib, 100*gib)
			mustInit(t, n)

			d := st.Devices()[0]
			if d.Memory != wire.MemorySystem || d.Total != 128*gib || d.Err != "" {
				t.Fatalf("device %+v, want the system's 128 GiB, memory %q, no error", d, wire.MemorySystem)
			}
			if len(frames) != 1 || frames[0].Memory != wire.MemorySystem {
				t.Errorf("device frames %+v, want one with memory %q", frames, wire.MemorySystem)
			}
			if _, l := book.Last(); !strings.Contains(l, "unified memory") {
				t.Errorf("log %q, want it to say the device is unified memory", l)
			}
			now := time.Now()
			n.tick(now)
			n.tick(now.Add(time.Millisecond)) // within systemEvery: not read again
			if u, _, ok := st.Latest(store.Key{Dev: 0, Metric: store.NVMLUsed}); !ok || u != 28*gib {
				t.Errorf("used %d (%v), want 28 GiB = MemTotal − MemAvailable", u, ok)
			}
			if c := st.Count(store.Key{Dev: 0, Metric: store.NVMLUsed}); c != 1 {
				t.Errorf("%d readings within %v, want 1", c, systemEvery)
			}
			n.meminfo = ""
			n.devs[0].meminfo = writeMeminfo(t, 128*gib, 96*gib)
			n.tick(now.Add(systemEvery))
			if u, _, _ := st.Latest(store.Key{Dev: 0, Metric: store.NVMLUsed}); u != 32*gib {
				t.Errorf("used %d after the system's memory changed, want 32 GiB", u)
			}
			n.refreshProcs()
			if procs, _ := st.Procs(0); len(procs) != 1 || procs[0].PID != 4242 || procs[0].Used != 3*gib {
				t.Errorf("procs %+v, want NVML's list (pid 4242, 3 GiB)", procs)
			}
		})
	}
}

// The system's memory unreadable shows on the device as an error naming
// the file and the line, not as no data; a good file clears it.
func TestUnifiedMemoryBadMeminfo(t *testing.T) {
	g := newFakeGPU(0, 0)
	st := newStore()
	n := NewNVML(newLib(g), ingest.New(st), NVMLOptions{})
	bad := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(bad, []byte("MemTotal: 1000 kB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.meminfo = bad
	mustInit(t, n)
	if d := st.Devices()[0]; d.Memory != wire.MemorySystem || !strings.Contains(d.Err, "has no MemAvailable line") || !strings.Contains(d.Err, bad) {
		t.Fatalf("device %+v, want memory %q and an error naming %s's missing MemAvailable", d, wire.MemorySystem, bad)
	}
	n.devs[0].meminfo = writeMeminfo(t, 64*gib, 60*gib)
	n.tick(time.Now().Add(time.Second))
	if d := st.Devices()[0]; d.Err != "" {
		t.Errorf("error %q after a good read", d.Err)
	}
	for _, c := range []struct{ text, want string }{
		{"MemTotal: x kB\nMemAvailable: 1 kB\n", `MemTotal is "x"`},
		{"MemTotal: 10 MB\nMemAvailable: 1 kB\n", "want a number of kB"},
		{"MemAvailable: 1 kB\n", "no MemTotal line"},
		{"MemTotal: 1 kB\nMemAvailable: 2 kB\n", "MemAvailable 2 kB against MemTotal 1 kB"},
	} {
		p := filepath.Join(t.TempDir(), "meminfo")
		os.WriteFile(p, []byte(c.text), 0o600)
		if _, _, err := systemMemory(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

type tapFunc func(wire.Frame)

func (f tapFunc) Frame(fr wire.Frame)           { f(fr) }
func (tapFunc) NVML(int, int64, uint64, uint64) {}

// What one reading of the system's memory costs (the reason it is read at
// most every systemEvery, not at NVML's 1 kHz).
func BenchmarkSystemMemory(b *testing.B) {
	for b.Loop() {
		if _, _, err := systemMemory("/proc/meminfo"); err != nil {
			b.Fatal(err)
		}
	}
}
