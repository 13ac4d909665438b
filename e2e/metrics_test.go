package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rankAgent is a test agent on the real socket: a torchrun worker's hello
// on an agent-only GPU, then whatever the test sends; the connection stays
// open until the test ends.
type rankAgent struct {
	t *testing.T
	c net.Conn
	w *bufio.Writer
}

func startRankAgent(t *testing.T, sock string, pid, rank int) *rankAgent {
	t.Helper()
	return startPlacedAgent(t, sock, pid, rank, rank, 2)
}

// startPlacedAgent is startRankAgent with a local rank and world size of
// its own.
func startPlacedAgent(t *testing.T, sock string, pid, rank, localRank, worldSize int) *rankAgent {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := &rankAgent{t: t, c: c, w: bufio.NewWriter(c)}
	a.send(`{"type":"hello","v":1,"pid":%d,"argv":["train.py"],"torch":"2.11.0","rank":"%d","local_rank":"%d","world_size":"%d","job":"e2e-job-7","devices":[{"index":0,"uuid":"GPU-e2e-%d","name":"E2E GPU","total":85899345920}],"t":%d}`,
		pid, rank, localRank, worldSize, rank, time.Now().UnixNano())
	return a
}

func (a *rankAgent) send(format string, args ...any) {
	a.t.Helper()
	fmt.Fprintf(a.w, format+"\n", args...)
	if err := a.w.Flush(); err != nil {
		a.t.Fatal(err)
	}
}

// sample sends one sample stamped now (plus off), allocated alloc, the
// other counters derived from it so each series has a value of its own.
func (a *rankAgent) sample(off time.Duration, alloc uint64) {
	a.send(`{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d,"inactive":%d,"alloc_retries":%d,"ooms":%d}`,
		time.Now().Add(off).UnixNano(), alloc, 2*alloc, 3*alloc, alloc/4, 5, 1)
}

// promAPI asks Prometheus's HTTP API the query q and decodes the answer's
// result into result; the test fails when the query does not succeed.
func promAPI(t *testing.T, base, q string, result any) {
	t.Helper()
	r, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %q: %v %s", q, err, body.Error)
	}
	if err := json.Unmarshal(body.Data.Result, result); err != nil {
		t.Fatalf("query %q: its result: %v", q, err)
	}
}

// promQuery asks Prometheus's HTTP API for an instant vector.
func promQuery(t *testing.T, base, q string) []promSeries {
	t.Helper()
	var res []promSeries
	promAPI(t, base, q, &res)
	return res
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSeries) value() string { v, _ := s.Value[1].(string); return v }

// waitQuery polls q until ok says the answer is the awaited one, then
// returns it; after a minute the test fails with the last answer.
func waitQuery(t *testing.T, base, q string, ok func([]promSeries) bool) []promSeries {
	t.Helper()
	var got []promSeries
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got = promQuery(t, base, q); ok(got) {
			return got
		}
	}
	t.Fatalf("query %q: still %+v", q, got)
	return nil
}

// startPrometheus starts a real Prometheus (Debian's) scraping target
// every second and waits until it is ready; it returns its API's base URL.
func startPrometheus(t *testing.T, prom, dir, target string, log *lockedBuffer) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gputop
    static_configs:
      - targets: ['%s']
`, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	ps := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	ps.Stdout, ps.Stderr = log, log
	if err := ps.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Process.Kill(); ps.Wait() })
	base := "http://" + promAddr
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get(base + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(end) {
			t.Fatal("prometheus is not ready after a minute")
		}
	}
}

// promSamples returns the raw samples of an instant query of a range
// selector (Prometheus's matrix): each sample's time and value.
func promSamples(t *testing.T, base, q string) []promPoint {
	t.Helper()
	var res []struct {
		Values [][2]any `json:"values"`
	}
	promAPI(t, base, q, &res)
	var out []promPoint
	for _, s := range res {
		for _, v := range s.Values {
			ts, _ := v[0].(float64)
			val, _ := v[1].(string)
			out = append(out, promPoint{time.Unix(0, int64(ts*1e9)), val})
		}
	}
	return out
}

type promPoint struct {
	T time.Time
	V string
}

// Two real Prometheus servers (a high-availability pair) scrape `gputop
// serve --source agent --metrics --metrics-window 5s` every second while
// two torchrun-like agents (ranks 0 and 1) stream known values over the
// real socket: every series carries exactly those values and labels; a
// 5 ms spike is in gputop_torch_allocated_max_bytes for both servers, in
// several scrapes of each for the 5 s window and in none after it; and
// promtool finds nothing wrong with the endpoint's output but
// dcgm-exporter's camelCase modelName.
func TestPrometheusScrapesServe(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("this test runs a real Prometheus server: apt-get install prometheus (.ci/run does)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool comes with Debian's prometheus package: apt-get install prometheus")
	}
	dir := t.TempDir()
	sockDir := filepath.Join(dir, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "gputop.sock")
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const window = 5 * time.Second
	srv := exec.Command(binary, "serve", "--source", "agent", "--socket", sock, "--metrics", metricsAddr,
		"--metrics-window", window.String())
	stderr := &lockedBuffer{}
	srv.Stderr = stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	stderr.waitFor(t, "metrics: serving http://"+metricsAddr+"/metrics")

	a0 := startRankAgent(t, sock, 5100, 0)
	stderr.waitFor(t, "pid 5100") // rank 0's GPU is gputop's GPU 0
	a1 := startRankAgent(t, sock, 5101, 1)
	a0.sample(0, 1000<<20)
	a1.sample(0, 2000<<20)
	stderr.waitFor(t, "pid 5101")

	plog := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus said:\n%s\ngputop serve said:\n%s", plog.String(), stderr.String())
		}
	})
	base := startPrometheus(t, prom, filepath.Join(dir, "prom-a"), metricsAddr, plog)
	baseB := startPrometheus(t, prom, filepath.Join(dir, "prom-b"), metricsAddr, plog)

	host, _ := os.Hostname()
	labels := func(rank int) map[string]string {
		return map[string]string{
			"job": "gputop", "instance": metricsAddr,
			"gpu": fmt.Sprint(rank), "UUID": fmt.Sprintf("GPU-e2e-%d", rank), "modelName": "E2E GPU", "Hostname": host,
			"pid": fmt.Sprint(5100 + rank), "rank": fmt.Sprint(rank), "local_rank": fmt.Sprint(rank), "job_id": "e2e-job-7",
		}
	}
	// every allocator series of both ranks, with exactly the values sent
	for _, c := range []struct {
		name string
		val  func(alloc uint64) uint64
	}{
		{"gputop_torch_allocated_bytes", func(a uint64) uint64 { return a }},
		{"gputop_torch_reserved_bytes", func(a uint64) uint64 { return 2 * a }},
		{"gputop_torch_peak_allocated_bytes", func(a uint64) uint64 { return 3 * a }},
		{"gputop_torch_allocated_max_bytes", func(a uint64) uint64 { return a }},
		{"gputop_torch_inactive_split_bytes", func(a uint64) uint64 { return a / 4 }},
		{"gputop_torch_alloc_retries_total", func(uint64) uint64 { return 5 }},
		{"gputop_torch_ooms_total", func(uint64) uint64 { return 1 }},
	} {
		got := waitQuery(t, base, c.name, func(r []promSeries) bool { return len(r) == 2 })
		for _, s := range got {
			rank := 0
			if s.Metric["rank"] == "1" {
				rank = 1
			}
			want := labels(rank)
			want["__name__"] = c.name
			if !reflect.DeepEqual(s.Metric, want) {
				t.Errorf("%s labels\n got %v\nwant %v", c.name, s.Metric, want)
			}
			if v := s.value(); v != fmt.Sprint(c.val(uint64(1000+1000*rank)<<20)) {
				t.Errorf("%s{rank=%d} = %s, want %d", c.name, rank, v, c.val(uint64(1000+1000*rank)<<20))
			}
		}
	}

	// A 5 ms spike at 1 kHz, back to the baseline at once: both servers
	// see it, each in the scrapes of the window after it, and neither
	// after that.
	maxQ := `gputop_torch_allocated_max_bytes{rank="0"}`
	for _, b := range []string{base, baseB} {
		waitQuery(t, b, `count_over_time(`+maxQ+`[1m])`, func(r []promSeries) bool {
			if len(r) != 1 {
				return false
			}
			n, _ := strconv.Atoi(r[0].value())
			return n >= 2
		})
	}
	spikeT := time.Now()
	for i := range 5 {
		a0.sample(time.Duration(i)*time.Millisecond, 7777<<20)
	}
	a0.sample(5*time.Millisecond, 1000<<20)
	spike, baseline := fmt.Sprint(uint64(7777<<20)), fmt.Sprint(uint64(1000<<20))
	for _, b := range []string{base, baseB} {
		waitQuery(t, b, `max_over_time(`+maxQ+`[1m])`, func(r []promSeries) bool {
			return len(r) == 1 && r[0].value() == spike
		})
	}
	time.Sleep(time.Until(spikeT.Add(window + 2*time.Second)))
	for i, b := range []string{base, baseB} {
		waitQuery(t, b, maxQ, func(r []promSeries) bool { return len(r) == 1 && r[0].value() == baseline })
		var seen []time.Time
		for _, p := range promSamples(t, b, maxQ+`[1m]`) {
			if p.V == spike {
				seen = append(seen, p.T)
			}
		}
		// scraped every second for a 5 s window: a few scrapes of each
		// server, and none from before the spike or past its window
		if len(seen) < 2 {
			t.Errorf("Prometheus %d has the spike in %d scrapes, want it in each scrape of the %v window", i, len(seen), window)
		}
		for _, at := range seen {
			if at.Before(spikeT.Add(-time.Second)) || at.After(spikeT.Add(window+2*time.Second)) {
				t.Errorf("Prometheus %d has the spike at %v, %v after it was sent (window %v)", i, at, at.Sub(spikeT), window)
			}
		}
	}

	// allocator layouts, for the dashboard's fragmentation and pool panels
	a0.send("%s", layoutFrame(time.Now().UnixNano(), 5, 64<<20, graphPool(32<<20)))
	a1.send("%s", layoutFrame(time.Now().UnixNano(), 3, 16<<20))
	waitQuery(t, base, "gputop_torch_pool_reserved_bytes", func(r []promSeries) bool { return len(r) == 3 })

	// a snapshot from code becomes the annotation series, at its time
	markT := time.Now().UnixNano()
	// with a ledger, for the dashboard's stacked ledger panel (every part but
	// outside torch, which needs NVML's figure for the process)
	a1.send(`{"type":"mark","t":%d,"label":"Epoch 1","devs":[{"dev":0,"allocated":1000,"reserved":2000,"peak":3000,`+
		`"ledger":{"t":%d,"allocated":1000,"reserved":2000,"params":100,"grads":200,"optimizer":300,"activations":50,"other_tensors":40,"workspace":10,"took_ms":1}}]}`, markT, markT)
	waitQuery(t, base, `gputop_torch_ledger_bytes{pid="5101"}`, func(r []promSeries) bool { return len(r) == 8 })
	waitQuery(t, base, `gputop_snapshot_timestamp_seconds{label="Epoch 1"}`, func(r []promSeries) bool {
		if len(r) != 1 {
			return false
		}
		v, _ := strconv.ParseFloat(r[0].value(), 64)
		return math.Abs(v-float64(markT)/1e9) < 1e-5
	})
	// JAX's figures beside torch's, for the dashboard's frameworks panel
	a1.send(`{"type":"framework","t":%d,"dev":0,"frameworks":[{"name":"jax","figures":[`+
		`{"of":"in_use","native":"bytes_in_use","value":4096},{"of":"reserved","native":"pool_bytes","value":8192},`+
		`{"of":"peak","native":"peak_bytes_in_use","value":6144},{"of":"limit","native":"bytes_limit","value":16384}]}]}`, time.Now().UnixNano())
	waitQuery(t, base, `gputop_framework_in_use_bytes{framework="jax",native="bytes_in_use"}`, func(r []promSeries) bool {
		return len(r) == 1 && r[0].value() == "4096"
	})
	dashboardQueries(t, base)

	// promtool on the endpoint's own output
	r, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(body), `gputop_torch_allocated_bytes{Hostname=`) {
		t.Fatalf("the endpoint lacks the allocator series:\n%s", body)
	}
	if !strings.Contains(string(body), "# HELP gputop_torch_allocated_max_bytes Highest allocated sample over the trailing 5s") {
		t.Errorf("the _max_ series' help text does not state the window:\n%s", body)
	}
	lint := func(text string) (string, int) {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, _ := lint(string(body))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasSuffix(l, " label names should be written in 'snake_case' not 'camelCase'") {
			t.Errorf("promtool check metrics: %s", l)
		}
	}
	// that one is dcgm-exporter's modelName, kept so the two join: with it
	// spelled in snake_case, promtool has nothing to say
	if out, code := lint(strings.ReplaceAll(string(body), "modelName=", "model_name=")); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics (modelName renamed): exit %d\n%s", code, out)
	}
}

// A --metrics port in use stops the TUI, record and serve before anything
// starts, naming the address: no screen drawn, no socket left, no file
// written; a malformed address is named too.
func TestMetricsPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	rec := filepath.Join(t.TempDir(), "run.gputop")
	for _, args := range [][]string{
		{"--source", "agent", "--metrics", addr},
		{"record", "-o", rec, "--source", "agent", "--metrics", addr},
		{"serve", "--source", "agent", "--metrics", addr},
	} {
		sock := filepath.Join(t.TempDir(), "s.sock")
		cmd := exec.Command(binary, append(args, "--socket", sock)...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		want := "--metrics " + addr + ": cannot listen: listen tcp " + addr + ": bind: address already in use"
		if !strings.Contains(string(out), want) || strings.Contains(string(out), "\x1b[") {
			t.Errorf("%v: output %q, want %q and no screen", args, out, want)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("%v: the agent socket was created", args)
		}
		if _, err := os.Stat(rec); err == nil {
			t.Errorf("%v: the recording was created", args)
		}
	}
	out, code := run(t, "serve", "--source", "agent", "--metrics", "9400")
	if code != 2 || !strings.Contains(out, `--metrics "9400": want HOST:PORT or :PORT`) {
		t.Errorf("a port without a colon: exit %d\n%s", code, out)
	}
}

// dashboardQueries runs every query of contrib/grafana/gputop.json, its
// variables set to "all", against the Prometheus: each is valid PromQL,
// and each panel and the annotation finds series.
func dashboardQueries(t *testing.T, base string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "contrib", "grafana", "gputop.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("contrib/grafana/gputop.json: %v", err)
	}
	vars := strings.NewReplacer(`"$host"`, `".*"`, `"$job"`, `".*"`, `"$pid"`, `".*"`, "$__range", "5m")
	type query struct{ where, expr string }
	var qs []query
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, query{p.Title, tg.Expr})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, query{"annotation " + a.Name, a.Expr})
		}
	}
	if len(qs) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	for _, q := range qs {
		expr := vars.Replace(q.expr)
		// the NVML panels have nothing to show under --source agent (nor
		// the ledger's outside torch, NVML's figure for the process −
		// reserved), nor the forecast's while no memory grows toward an OOM
		if strings.Contains(expr, "gputop_nvml_") || strings.Contains(expr, "gputop_sample_rate") ||
			strings.Contains(expr, "gputop_process_nvml") || strings.Contains(expr, `part="outside_torch"`) ||
			strings.Contains(expr, "_forecast_") {
			promQuery(t, base, expr)
			continue
		}
		if r := promQuery(t, base, expr); len(r) == 0 {
			t.Errorf("dashboard %s: %s finds nothing", q.where, expr)
		}
	}
}

// The TUI in a real terminal with --metrics: the ranked process shows as
// rank 1/2 in the process pane while the endpoint serves its series with
// the same rank; --metrics with --replay is refused.
func TestTUIMetricsAndRank(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tm := startTerm(t, 160, 50, "--source", "agent", "--socket", sock, "--metrics", addr)
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no socket; screen:\n%s", tm.screen())
		}
	}
	a := startRankAgent(t, sock, 6300, 1)
	a.sample(0, 300<<20)
	tm.waitFor("rank 1/2  train.py")
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	want := `gputop_torch_allocated_bytes{Hostname="`
	i := strings.Index(string(body), want)
	if i < 0 || !strings.Contains(string(body)[i:], `pid="6300",rank="1"} 3.145728e+08`) {
		t.Errorf("the endpoint lacks rank 1's allocated bytes:\n%s", body)
	}
	out, code := run(t, "--replay", filepath.Join(dir, "none.gputop"), "--metrics", addr)
	if code != 2 || !strings.Contains(out, "--metrics serves what a live gputop samples; not with --demo or --replay") {
		t.Errorf("--replay with --metrics: exit %d\n%s", code, out)
	}
}
