package metrics

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const (
	t0   = int64(1_767_225_600_000_000_000)
	ms   = int64(time.Millisecond)
	uuid = "GPU-6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
)

// scrape gathers c through a pedantic registry (which checks every metric
// against its descriptor) and returns "name{labels} value" lines, sorted.
func scrape(t *testing.T, c *Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out = append(out, line(mf, m))
		}
	}
	sort.Strings(out)
	return out
}

func line(mf *dto.MetricFamily, m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	v := m.GetGauge().GetValue()
	if mf.GetType() == dto.MetricType_COUNTER {
		v = m.GetCounter().GetValue()
	}
	return fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(ls, ","), v)
}

func newStore() *store.Store {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: uuid, Name: "NVIDIA H200", Total: 150754820096, Source: "nvml"})
	st.SetRate(0, 998.5)
	return st
}

func rankHello(pid int, rank string) wire.Hello {
	return wire.Hello{Type: wire.TypeHello, V: 1, PID: pid, Rank: rank, LocalRank: rank, WorldSize: "8", Job: "tr-5f3a",
		Devices: []wire.AgentDevice{{Index: 0, UUID: uuid, Name: "NVIDIA H200"}}, T: t0}
}

// Every series of the issue, with dcgm-exporter's labels and the values put
// in.
func TestCollectorSeriesAndLabels(t *testing.T) {
	st := newStore()
	st.AgentHello(rankHello(4242, "3"))
	st.AgentSample(4242, wire.Sample{T: t0 + ms, Dev: 0, Allocated: 1000, Reserved: 4096, Peak: 3000, Inactive: 96, AllocRetries: 2, OOMs: 1})
	st.SetProcs(0, t0+ms, []wire.Proc{{PID: 4242, Name: "python", Used: 6000}})
	st.AddNVML(0, t0+2*ms, 7000, 0)
	st.TakeSnapshot("Epoch 1", 0, t0+3*ms, "key", nil, false)
	c := NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, t0+time.Second.Nanoseconds()) }})
	got := scrape(t, c)
	gpu := `gpu="0",UUID="` + uuid + `",modelName="NVIDIA H200",Hostname="node1"`
	// the GPU's own memory: memory="", which Prometheus stores as no label
	// (the series of versions before the label)
	nvmlGPU := gpu + `,memory=""`
	proc := gpu + `,pid="4242",rank="3",local_rank="3",job_id="tr-5f3a"`
	want := []string{
		"gputop_nvml_total_bytes{" + nvmlGPU + "} 1.50754820096e+11",
		"gputop_nvml_used_bytes{" + nvmlGPU + "} 7000",
		"gputop_nvml_used_max_bytes{" + nvmlGPU + "} 7000",
		"gputop_nvml_used_min_bytes{" + nvmlGPU + "} 7000",
		"gputop_process_nvml_used_bytes{" + proc + "} 6000",
		"gputop_sample_rate_hz{" + gpu + "} 998.5",
		"gputop_snapshot_timestamp_seconds{label=\"Epoch 1\"} 1.767225600003e+09",
		"gputop_snapshots_total{} 1",
		"gputop_torch_alloc_retries_total{" + proc + "} 2",
		"gputop_torch_allocated_bytes{" + proc + "} 1000",
		"gputop_torch_allocated_max_bytes{" + proc + "} 1000",
		"gputop_torch_inactive_split_bytes{" + proc + "} 96",
		"gputop_torch_ooms_total{" + proc + "} 1",
		"gputop_torch_peak_allocated_bytes{" + proc + "} 3000",
		"gputop_torch_pools_cut{} 0",
		"gputop_torch_reserved_bytes{" + proc + "} 4096",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d series:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i := range want {
		if canon(got[i]) != canon(want[i]) {
			t.Errorf("series %d\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// canon sorts a line's labels, so a want line can list them in
// dcgm-exporter's order.
func canon(s string) string {
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return s
	}
	ls := strings.Split(s[i+1:j], ",")
	sort.Strings(ls)
	return s[:i+1] + strings.Join(ls, ",") + s[j:]
}

// A 5 ms spike and a dip show in the _max_ and _min_ series of every
// scrape whose window covers them, however many scrapes there are, and the
// help text states the window; once the window has passed them they are
// gone.
func TestCollectorExtremesOverTheWindow(t *testing.T) {
	st := newStore()
	st.AgentHello(rankHello(4242, "0"))
	at := t0
	c := NewCollector(st, Options{Hostname: "n", Window: 20 * time.Second, Now: func() time.Time { return time.Unix(0, at) }})
	feed := func(n int, spike bool) {
		for i := 0; i < n; i++ {
			v, a := uint64(5000), uint64(100)
			if spike && i >= n/2 && i < n/2+5 {
				v, a = 9000, 700
			}
			if spike && i == n/4 {
				v = 10
			}
			st.AddNVML(0, at, v, 0)
			if i%10 == 0 || (a == 700) {
				st.AgentSample(4242, wire.Sample{T: at, Dev: 0, Allocated: a, Reserved: 1000, Peak: 700})
			}
			at += ms
		}
	}
	value := func(lines []string, name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, name+"{") {
				return l[strings.LastIndexByte(l, ' ')+1:]
			}
		}
		return "missing"
	}
	feed(1000, false)
	feed(15_000, true) // a 15 s scrape interval at 1 kHz
	// three scrapers (a Prometheus pair and a third) in the same second
	for i := range 3 {
		got := scrape(t, c)
		for name, want := range map[string]string{
			"gputop_nvml_used_max_bytes": "9000", "gputop_nvml_used_min_bytes": "10", "gputop_nvml_used_bytes": "5000",
			"gputop_torch_allocated_max_bytes": "700", "gputop_torch_allocated_bytes": "100",
		} {
			if v := value(got, name); v != want {
				t.Errorf("scrape %d after the spike: %s = %s, want %s", i, name, v, want)
			}
		}
	}
	feed(10_000, false) // the spike is now 2.5 s inside the window's start
	if v := value(scrape(t, c), "gputop_nvml_used_max_bytes"); v != "9000" {
		t.Errorf("17.5 s after the spike: used max %s, want it still", v)
	}
	feed(5000, false)
	got := scrape(t, c)
	for name, want := range map[string]string{
		"gputop_nvml_used_max_bytes": "5000", "gputop_nvml_used_min_bytes": "5000", "gputop_torch_allocated_max_bytes": "100",
	} {
		if v := value(got, name); v != want {
			t.Errorf("once the window has passed: %s = %s, want %s", name, v, want)
		}
	}
	// the window is in the help text
	ch := make(chan *prometheus.Desc, 32)
	c.Describe(ch)
	close(ch)
	var windowed int
	for d := range ch {
		if strings.Contains(d.String(), "over the trailing 20s") {
			windowed++
		}
	}
	if windowed != 3 {
		t.Errorf("%d descriptors name the 20s window, want 3 (used max and min, allocated max)", windowed)
	}
}

// Scrapes at once all succeed and agree: the collector keeps nothing
// between them (go test -race holds it to that).
func TestCollectorConcurrentScrapes(t *testing.T) {
	st := newStore()
	st.AgentHello(rankHello(4242, "0"))
	for i := int64(0); i < 2000; i++ {
		v := uint64(5000)
		if i == 1000 {
			v = 9000
		}
		st.AddNVML(0, t0+i*ms, v, 0)
		st.AgentSample(4242, wire.Sample{T: t0 + i*ms, Dev: 0, Allocated: v})
	}
	c := NewCollector(st, Options{Hostname: "n", Now: func() time.Time { return time.Unix(0, t0+2*time.Second.Nanoseconds()) }})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for range 20 {
				mfs, err := reg.Gather()
				if err != nil {
					errs <- err
					return
				}
				for _, mf := range mfs {
					if strings.HasSuffix(mf.GetName(), "_max_bytes") && mf.GetMetric()[0].GetGauge().GetValue() != 9000 {
						errs <- fmt.Errorf("%s = %g", mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Thousands of short-lived processes: the exported label sets stay within
// the connected ones plus MaxGone, and those gone longer than GoneFor go.
func TestCollectorBoundsGoneProcesses(t *testing.T) {
	st := newStore()
	now := t0
	c := NewCollector(st, Options{Hostname: "n", Now: func() time.Time { return time.Unix(0, now) }})
	const n = 3000
	for pid := 1; pid <= n; pid++ {
		st.AgentHello(rankHello(pid, ""))
		st.AgentSample(pid, wire.Sample{T: now, Dev: 0, Allocated: uint64(pid)})
		if pid > 2 { // pids 1 and 2 stay connected
			st.AgentEnded(pid, now, pid%2 == 0, "")
		}
		now += ms
		if pid%500 == 0 {
			if k := pids(scrape(t, c)); len(k) > 2+DefaultMaxGone {
				t.Fatalf("after %d processes: %d exported", pid, len(k))
			}
		}
	}
	got := pids(scrape(t, c))
	if len(got) != 2+DefaultMaxGone || !got["1"] || !got["2"] || !got[fmt.Sprint(n)] || got["3"] {
		t.Fatalf("exported %d processes: want the 2 connected and the %d most recently ended", len(got), DefaultMaxGone)
	}
	now += DefaultGoneFor.Nanoseconds() + 1
	if got := pids(scrape(t, c)); len(got) != 2 {
		t.Errorf("%d processes exported after %v; want the 2 connected", len(got), DefaultGoneFor)
	}
}

func pids(lines []string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lines {
		if i := strings.Index(l, `pid="`); i >= 0 {
			m[l[i+5:i+5+strings.IndexByte(l[i+5:], '"')]] = true
		}
	}
	return m
}

// Row labels: the newest RowLabels distinct ones, each at its
// newest time, text from outside clipped and valid UTF-8.
func TestCollectorRowLabels(t *testing.T) {
	st := newStore()
	st.AddNVML(0, t0, 1, 0)
	for i := 0; i < 30; i++ {
		st.TakeSnapshot(fmt.Sprintf("epoch %d", i%15), 0, t0+int64(i+1)*ms, "cli", nil, false)
	}
	st.TakeSnapshot(strings.Repeat("é", 80)+"\xff", 0, t0+100*ms, "cli", nil, false)
	var labels []string
	for _, l := range scrape(t, NewCollector(st, Options{})) {
		if strings.HasPrefix(l, "gputop_snapshot_timestamp_seconds") {
			labels = append(labels, l)
		}
	}
	if len(labels) != RowLabels {
		t.Fatalf("%d labels:\n%s", len(labels), strings.Join(labels, "\n"))
	}
	long := 0
	for _, l := range labels {
		if strings.Contains(l, "éé") {
			long++
			if len(l) > 200 || !strings.Contains(l, "…") {
				t.Errorf("a long label is not clipped: %s", l)
			}
		}
	}
	if long != 1 || !strings.Contains(strings.Join(labels, "\n"), `label="epoch 14"} 1.767225600030`) {
		t.Errorf("labels:\n%s", strings.Join(labels, "\n"))
	}
}

// A remote host's GPU and process (gputop --ssh): Hostname is that host's,
// pid the host's own pid, not gputop's key for it.
func TestCollectorRemoteHost(t *testing.T) {
	st := newStore()
	st.SetDevice(store.Device{Index: 1, UUID: "GPU-remote", Name: "NVIDIA H200", Total: 1 << 30, Source: "nvml", Host: "node2"})
	key := store.HostPID(1, 4242)
	h := rankHello(key, "7")
	h.Devices = []wire.AgentDevice{{Index: 0, UUID: "GPU-remote"}}
	st.AgentHello(h)
	st.AgentSample(key, wire.Sample{T: t0, Dev: 0, Allocated: 5})
	var found bool
	for _, l := range scrape(t, NewCollector(st, Options{Hostname: "login"})) {
		if strings.HasPrefix(l, "gputop_torch_allocated_bytes{") {
			found = true
			if want := `gputop_torch_allocated_bytes{Hostname="node2",UUID="GPU-remote",gpu="1",job_id="tr-5f3a",local_rank="7",modelName="NVIDIA H200",pid="4242",rank="7"} 5`; l != want {
				t.Errorf("\n got %s\nwant %s", l, want)
			}
		}
	}
	if !found {
		t.Fatal("no allocated series")
	}
}

// Two processes in pid namespaces gputop cannot see, both pid 1 and the
// same rank of the same job: two label sets (a pid label of their keys),
// so a scrape does not fail on a duplicate series.
func TestCollectorNamespaceLocalAgents(t *testing.T) {
	st := newStore()
	for conn := 1; conn <= 2; conn++ {
		key := store.NamespacePID(conn, 1)
		st.AgentHello(rankHello(key, "0"))
		st.AgentSample(key, wire.Sample{T: t0, Dev: 0, Allocated: uint64(conn)})
	}
	var got []string
	for _, l := range scrape(t, NewCollector(st, Options{Hostname: "node1"})) {
		if strings.HasPrefix(l, "gputop_torch_allocated_bytes{") {
			got = append(got, l)
		}
	}
	if len(got) != 2 || !strings.Contains(got[0], `pid="ns1:1"`) || !strings.Contains(got[1], `pid="ns2:1"`) {
		t.Fatalf("allocated series:\n%s", strings.Join(got, "\n"))
	}
}

// A unified-memory GPU's NVML series say that they are the system's
// memory (memory="system"); a GPU's own memory keeps the series of
// earlier versions (no memory label), as the test above holds.
func TestUnifiedMemoryLabelled(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: uuid, Name: "NVIDIA GB10", Total: 128 << 30, Source: "nvml", Memory: wire.MemorySystem})
	st.AddNVML(0, t0+2*ms, 28<<30, 0)
	c := NewCollector(st, Options{Hostname: "spark", Now: func() time.Time { return time.Unix(0, t0+time.Second.Nanoseconds()) }})
	got := strings.Join(scrape(t, c), "\n")
	for _, name := range []string{"gputop_nvml_total_bytes", "gputop_nvml_used_bytes", "gputop_nvml_used_max_bytes", "gputop_nvml_used_min_bytes"} {
		if !strings.Contains(got, name+"{") || !regexp.MustCompile(name+`\{[^}]*memory="system"`).MatchString(got) {
			t.Errorf("%s without memory=\"system\":\n%s", name, got)
		}
	}
}
