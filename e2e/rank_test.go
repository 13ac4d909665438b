package e2e

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// A torchrun worker whose RANK (3) and LOCAL_RANK (1) differ keeps each in
// its own place all the way through the real binary: the metrics
// endpoint's rank and local_rank labels (read from the live store), the
// recording's hello and the store it loads into, and the exported CSV's
// rank column. Every other test's agent has the two equal, where a swap
// anywhere would go unseen.
func TestRankAndLocalRankApart(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "gputop.sock")
	rec := filepath.Join(dir, "ranks.gputop")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd, out := startServe(t, dir, sock, "-o", rec, "--metrics", addr)
	out.waitFor(t, "metrics: serving")
	a := startPlacedAgent(t, sock, 6400, 3, 1, 8)
	a.sample(0, 300<<20)
	a.send(`{"type":"mark","t":%d,"label":"epoch 1","devs":[{"dev":0,"allocated":%d,"reserved":%d,"peak":%d}]}`,
		time.Now().UnixNano(), 300<<20, 600<<20, 900<<20)

	// the endpoint: the allocator series of pid 6400 with both labels
	labelRE := regexp.MustCompile(`(\w+)="([^"]*)"`)
	var series string
	for end := time.Now().Add(15 * time.Second); series == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no gputop_torch_allocated_bytes of pid 6400 on the endpoint; serve said:\n%s", out)
		}
		r, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "gputop_torch_allocated_bytes{") && strings.Contains(l, `pid="6400"`) {
				series = l
			}
		}
	}
	labels := map[string]string{}
	for _, m := range labelRE.FindAllStringSubmatch(series, -1) {
		labels[m[1]] = m[2]
	}
	if labels["rank"] != "3" || labels["local_rank"] != "1" {
		t.Errorf("endpoint: rank %q, local_rank %q, want 3 and 1: %s", labels["rank"], labels["local_rank"], series)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("serve exit %d\n%s", code, out)
	}
	// the recording: its hello as the agent sent it, and the store it loads into
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := recording.NewDecoder(rec, f)
	var hello *wire.Hello
	for {
		f, err := dec.Next()
		if err != nil {
			break
		}
		if h, ok := f.(wire.Hello); ok {
			hello = &h
		}
	}
	if hello == nil || hello.Rank != "3" || hello.LocalRank != "1" || hello.WorldSize != "8" {
		t.Errorf("recorded hello %+v, want rank 3, local rank 1 of 8", hello)
	}
	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(rec, st); err != nil {
		t.Fatal(err)
	}
	ag := st.Agents()
	if want := (wire.Place{Rank: 3, LocalRank: 1, WorldSize: 8, Job: "e2e-job-7"}); len(ag) != 1 || ag[0].Place != want {
		t.Errorf("agents loaded from the recording %+v, want one with place %+v", ag, want)
	}
	csvOut, errText, code := runSplit(t, "export", rec, "--csv", "-")
	if code != 0 {
		t.Fatalf("export exit %d: %s", code, errText)
	}
	recs, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("exported CSV (%v):\n%s", err, csvOut)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	var ranks []string
	for _, r := range recs[1:] {
		if r[col["label"]] == "epoch 1" {
			ranks = append(ranks, r[col["rank"]])
		}
	}
	if len(ranks) != 1 || ranks[0] != "3" {
		t.Errorf("exported rank of the mark's row %q, want [3]:\n%s", ranks, csvOut)
	}
}
