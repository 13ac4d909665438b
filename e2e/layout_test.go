package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// layoutFrame is a layout frame as an agent sends it: torch device 0,
// free bytes free with its largest block half of it, the default pool and
// any more pools given as `{"kind":…}` objects.
func layoutFrame(t int64, segments int, free uint64, pools ...string) string {
	reserved := 8 * free
	all := append([]string{fmt.Sprintf(`{"kind":"default","id":"0,0","segments":%d,"reserved":%d,"allocated":%d,"largest_free":%d}`,
		segments, 6*free, 5*free, free/2)}, pools...)
	return fmt.Sprintf(`{"type":"layout","dev":0,"t":%d,"segments":%d,"blocks":%d,"reserved":%d,"allocated":%d,"free_in_segments":%d,"largest_free":%d,"pools":[%s],"settings":{"from":"torch","expandable_segments":false,"items":[{"name":"max_split_size","value":"none"}]},"took_ms":2.5}`,
		t, segments, 3*segments, reserved, reserved-free, free, free/2, strings.Join(all, ","))
}

// graphPool is a CUDA graph's private pool of reserved bytes.
func graphPool(reserved uint64) string {
	return fmt.Sprintf(`{"kind":"graph","id":"1,4","segments":1,"reserved":%d,"allocated":0,"largest_free":%d}`, reserved, reserved)
}

var exposition = regexp.MustCompile(`(?m)^(gputop_\w+)(?:\{([^}]*)\})? (\S+)$`)

// layoutNames are the layout series' names.
var layoutNames = regexp.MustCompile(`^gputop_torch_(free_in_segments_bytes|largest_free_block_bytes|segments|pool_reserved_bytes|pools_cut)$`)

// scrapeSeries scrapes the real endpoint and returns the series whose name
// keep accepts, as "name{pid,pool_kind,pool_id}" (the labels a test tells
// apart; "name" alone for a series without labels) -> value, written as
// an integer where it is one.
func scrapeSeries(t *testing.T, addr string, keep func(name string) bool) map[string]string {
	t.Helper()
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	out := map[string]string{}
	label := func(labels, name string) string {
		m := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(labels)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, m := range exposition.FindAllStringSubmatch(string(body), -1) {
		if !keep(m[1]) {
			continue
		}
		key := m[1]
		if m[2] != "" {
			key += fmt.Sprintf("{%s,%s,%s}", label(m[2], "pid"), label(m[2], "pool_kind"), label(m[2], "pool_id"))
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%s: value %q", m[0], m[3])
		}
		out[key] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return out
}

// layoutSeries is scrapeSeries of the layout series.
func layoutSeries(t *testing.T, addr string) map[string]string {
	t.Helper()
	return scrapeSeries(t, addr, layoutNames.MatchString)
}

// waitSeries scrapes until ok says the layout series are the awaited ones.
func waitSeries(t *testing.T, addr string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	var got map[string]string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got = layoutSeries(t, addr); ok(got) {
			return got
		}
	}
	t.Fatalf("layout series still %v", got)
	return nil
}

// An agent sends layout frames over the real socket to `gputop serve
// --metrics`: the endpoint serves the newest reading's free bytes in
// segments, largest free block, segments and each pool's reserved bytes
// under the process's labels; a CUDA graph's pool appears with the reading
// that lists it and disappears with the one that does not; a skipped
// reading leaves the series as they were.
func TestLayoutMetricsServe(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := exec.Command(binary, "serve", "--source", "agent", "--socket", sock, "--metrics", addr)
	stderr := &lockedBuffer{}
	srv.Stderr = stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	stderr.waitFor(t, "metrics: serving http://"+addr+"/metrics")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gputop serve said:\n%s", stderr.String())
		}
	})

	a := startRankAgent(t, sock, 5300, 0)
	stderr.waitFor(t, "pid 5300")
	a.sample(0, 1000<<20)
	a.send("%s", layoutFrame(time.Now().UnixNano(), 5, 64<<20, graphPool(32<<20)))
	got := waitSeries(t, addr, func(m map[string]string) bool { return len(m) == 6 })
	want := map[string]string{
		"gputop_torch_free_in_segments_bytes{5300,,}":        fmt.Sprint(64 << 20),
		"gputop_torch_largest_free_block_bytes{5300,,}":      fmt.Sprint(32 << 20),
		"gputop_torch_segments{5300,,}":                      "5",
		"gputop_torch_pool_reserved_bytes{5300,default,0,0}": fmt.Sprint(6 * 64 << 20),
		"gputop_torch_pool_reserved_bytes{5300,graph,1,4}":   fmt.Sprint(32 << 20),
		"gputop_torch_pools_cut":                             "0",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the endpoint's layout series\n got %v\nwant %v", got, want)
	}

	// the graph is gone from the next reading: its pool's series goes
	a.send("%s", layoutFrame(time.Now().UnixNano(), 4, 16<<20))
	got = waitSeries(t, addr, func(m map[string]string) bool { return m["gputop_torch_segments{5300,,}"] == "4" })
	if _, ok := got["gputop_torch_pool_reserved_bytes{5300,graph,1,4}"]; ok || len(got) != 5 {
		t.Fatalf("after the graph's pool went: %v", got)
	}
	if got["gputop_torch_largest_free_block_bytes{5300,,}"] != fmt.Sprint(8<<20) {
		t.Errorf("largest free block after the new reading: %v", got)
	}
	// a skip says why there is no reading: the newest reading stays
	a.send(`{"type":"layout","dev":0,"t":%d,"skipped":"the reading would take 80 ms, over the 50 ms bound","segments":0,"blocks":0,"reserved":0,"allocated":0,"free_in_segments":0,"largest_free":0}`, time.Now().UnixNano())
	a.sample(0, 1001<<20)
	allocated := func() string {
		return scrapeSeries(t, addr, func(n string) bool { return n == "gputop_torch_allocated_bytes" })["gputop_torch_allocated_bytes{5300,,}"]
	}
	for end := time.Now().Add(10 * time.Second); allocated() != fmt.Sprint(1001<<20); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the sample after the skip never showed")
		}
	}
	if after := layoutSeries(t, addr); fmt.Sprint(after) != fmt.Sprint(got) {
		t.Errorf("a skip changed the layout series\n got %v\nwant %v", after, got)
	}
}

// sendLayouts plays an agent over the real socket: two layout readings (a
// CUDA graph's pool in the first only), a skip, a mark with a layout of
// its own, bye; once gputop has closed the connection (it has taken in
// every frame) it returns the time the frames count from.
func sendLayouts(t *testing.T, sock string, pid int) int64 {
	t.Helper()
	a := startRankAgent(t, sock, pid, 0)
	t0 := time.Now().UnixNano()
	a.send("%s", layoutFrame(t0+1e6, 5, 64<<20, graphPool(32<<20)))
	a.send("%s", layoutFrame(t0+2e6, 6, 48<<20))
	a.send(`{"type":"layout","dev":0,"t":%d,"skipped":"this torch cannot list its segments","segments":0,"blocks":0,"reserved":0,"allocated":0,"free_in_segments":0,"largest_free":0}`, t0+3e6)
	a.send(`{"type":"mark","t":%d,"label":"Epoch 1","devs":[{"dev":0,"allocated":1,"reserved":2,"peak":3,"layout":{"t":%d,"segments":7,"blocks":9,"reserved":1024,"allocated":512,"free_in_segments":512,"largest_free":100}}]}`, t0+4e6, t0+4e6)
	a.send(`{"type":"bye","t":%d}`, t0+5e6)
	a.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(a.c); err != nil {
		t.Fatalf("gputop did not close the connection after bye: %v", err)
	}
	return t0
}

// checkLayouts loads a stream sendLayouts made, and checks that it holds
// its three layout lines and that a replay at a cursor sees the layout
// read then, the skip's reason, and the mark's row with its own layout.
func checkLayouts(t *testing.T, data []byte, pid int, t0 int64) {
	t.Helper()
	if n := bytes.Count(data, []byte(fmt.Sprintf(`{"type":"layout","pid":%d,"dev":0,`, pid))); n != 3 {
		t.Fatalf("%d layout lines of pid %d in the stream, want 3:\n%s", n, pid, data)
	}
	st := store.New(store.DefaultOptions())
	if _, err := recording.LoadReader("stream", bytes.NewReader(data), st); err != nil {
		t.Fatal(err)
	}
	dev := st.Agents()[0].DevMap[0]
	at := st.LayoutAt(pid, dev, t0+1500e3)
	if !at.OK || at.Layout.Segments != 5 || len(at.Layout.Pools) != 2 || at.Layout.Pools[1].Kind != "graph" || at.Skipped != "" {
		t.Errorf("the replay at the first reading: %+v", at)
	}
	at = st.LayoutAt(pid, dev, t0+3500e3)
	if !at.OK || at.Layout.Segments != 6 || len(at.Layout.Pools) != 1 || at.Skipped != "this torch cannot list its segments" {
		t.Errorf("the replay after the skip: %+v", at)
	}
	rows := st.Rows()
	if len(rows) != 1 || rows[0].Layout == nil || rows[0].Layout.Segments != 7 {
		t.Errorf("the mark's row: %+v", rows)
	}
}

// `gputop record` writes the layout frames an agent sends over the real
// socket, with the process's pid, and the file loads back (checkLayouts),
// in gputop export too.
func TestRecordWritesLayouts(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	out := filepath.Join(dir, "run.gputop")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", out)
	waitFile(t, sock)
	t0 := sendLayouts(t, sock, 5400)
	if code := r.stop(); code != 0 {
		t.Fatalf("record exit %d: %s", code, r.stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	checkLayouts(t, data, 5400, t0)
	if outp, code := run(t, "export", out, "--csv", filepath.Join(dir, "run.csv")); code != 0 {
		t.Errorf("export of the recording: exit %d\n%s", code, outp)
	}
}

// `gputop serve --stdio` (what --ssh reads) streams them the same way.
func TestServeStdioWritesLayouts(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command(binary, "serve", "--stdio", "--source", "agent", "--socket", sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	said := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = &out, said
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFile(t, sock)
	t0 := sendLayouts(t, sock, 5500)
	stdin.Close() // the end of standard input ends serve
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v: %s", err, said.String())
	}
	checkLayouts(t, out.Bytes(), 5500, t0)
}
