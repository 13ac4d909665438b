package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

const gib = 1 << 30

// cacheLayout is torch's cache of the agent in the tests below: 8 GiB
// reserved with free bytes free, its largest block largest, in the
// default pool and the pools given, read with torch's settings
// (expandable_segments not in force).
func cacheLayout(t int64, free, largest uint64, pools ...wire.Pool) *wire.Layout {
	no := false
	all := append([]wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 12, Reserved: 8 * gib, Allocated: 8*gib - free, LargestFree: largest}}, pools...)
	var reserved uint64
	for _, p := range all {
		reserved += p.Reserved
	}
	return &wire.Layout{T: t, Segments: 12 + len(pools), Blocks: 40, Reserved: reserved, Allocated: reserved - free,
		FreeInSegments: free, LargestFree: largest, Pools: all,
		Settings: &wire.AllocSettings{From: "torch", Expandable: &no, Items: []wire.Setting{{Name: "max_split_size_mb", Value: "512"}}},
		TookMS:   1.5}
}

// privatePool is a CUDA graph's private pool the agent could not tell
// from a MemPool.
var privatePool = wire.Pool{Kind: wire.PoolPrivate, ID: "1,7", Segments: 1, Reserved: 2 * gib, Allocated: 2 * gib}

// sendJSON sends a frame as the agent's JSON line.
func (a *rankAgent) sendJSON(f any) {
	a.t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		a.t.Fatal(err)
	}
	a.send("%s", b)
}

// waitForWords polls the screen until its words, wrapped or not, hold
// those of s, and returns them one space apart.
func (tm *term) waitForWords(s string) string {
	tm.t.Helper()
	want := strings.Join(strings.Fields(s), " ")
	var scr string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		scr = tm.screen()
		if words := strings.Join(strings.Fields(scr), " "); strings.Contains(words, want) {
			return words
		}
	}
	tm.t.Fatalf("screen never showed %q; last screen:\n%s", s, scr)
	return ""
}

// layoutRun plays a training process whose cache the agent reads, over
// the real socket: a reading of the default pool alone, one with a
// private pool, a row whose mark carries that, the pool gone, a skipped
// reading, an OOM of fragmentation (6 GiB free, blocks of at most 512
// MiB, 800 MiB asked) and an end row. at is called after each step with
// what the step made visible, for the caller to look.
func layoutRun(t *testing.T, sock string, pid int, at func(step string)) *rankAgent {
	a := startRankAgent(t, sock, pid, 0)
	now := func() int64 { return time.Now().UnixNano() }
	a.sample(0, 6*gib)
	step := at
	at = func(what string) {
		a.sample(0, 6*gib) // the counters go on between the steps, as an agent's do
		step(what)
	}
	layout := func(l *wire.Layout) { a.sendJSON(wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: *l}) }
	layout(cacheLayout(now(), 1*gib, 256<<20))
	at("default pool")
	layout(cacheLayout(now(), 1*gib, 256<<20, privatePool))
	at("private pool")
	a.sendJSON(wire.Mark{Type: wire.TypeMark, T: now(), Label: "step 1",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 9 * gib, Reserved: 10 * gib, Peak: 9 * gib, Layout: cacheLayout(now(), 1*gib, 256<<20, privatePool)}}})
	at("row")
	layout(cacheLayout(now(), 512<<20, 128<<20))
	at("pool gone")
	a.sendJSON(wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Skipped: "the reading would take 80 ms, over the 50 ms bound", Layout: wire.Layout{T: now()}})
	at("skipped")
	t1 := now()
	a.sendJSON(wire.OOM{Type: wire.TypeOOM, T: t1, Dev: 0, Requested: 800 << 20, Free: 300 << 20, Limit: 80 * gib,
		Allocated: 58 * gib, Reserved: 64 * gib, Peak: 60 * gib, Layout: &wire.Layout{T: t1, Segments: 40, Blocks: 900,
			Reserved: 64 * gib, Allocated: 58 * gib, FreeInSegments: 6 * gib, LargestFree: 512 << 20,
			Pools:    []wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 40, Reserved: 64 * gib, Allocated: 58 * gib, LargestFree: 512 << 20}},
			Settings: cacheLayout(0, 0, 0).Settings}})
	at("oom")
	yes := true
	a.sendJSON(wire.Mark{Type: wire.TypeMark, T: now(), Label: "After cleanup", End: &yes,
		Devs: []wire.DevStats{{Dev: 0, Allocated: 0, Reserved: 1 * gib, Peak: 60 * gib, Layout: cacheLayout(now(), 1*gib, 1*gib)}}})
	at("end row")
	return a
}

// torch's cache as gputop shows it, end to end through the real binary:
// an agent on the real socket reads the cache, and the TUI shows the
// selected process's newest reading (a private pool appearing and going,
// a skipped reading's reason), the OOM explained from the cache read at it
// and the rows' cache in their details; `gputop record` of the same run
// keeps it: its replay shows the cache at the cursor, and `gputop export`
// gives the CSV's four columns and the cache under the end row and the
// OOM.
func TestCacheLayoutShown(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "tui.sock")
	tm := startTerm(t, 120, 40, "--source", "agent", "--socket", sock)
	waitFile(t, sock)
	screens := map[string]string{}
	layoutRun(t, sock, 5400, func(step string) {
		switch step {
		case "default pool":
			screens[step] = tm.waitForWords("all in the default pool")
		case "private pool":
			screens[step] = tm.waitForWords("private 1,7 2.00 GiB")
		case "pool gone":
			screens[step] = tm.waitForWords("largest free block 128.0 MiB")
			if strings.Contains(screens[step], "private 1,7") {
				t.Errorf("the private pool should be gone from the newest reading:\n%s", screens[step])
			}
		case "skipped":
			screens[step] = tm.waitForWords("the reading would take 80 ms")
		case "oom":
			screens[step] = tm.waitForWords("Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
		}
	})
	oom := screens["oom"]
	for _, want := range []string{
		"Measured at the OOM: 6.00 GiB free in torch's cache but its largest free block is 512.0 MiB, less than the 800.0 MiB asked: fragmentation (91.7% = 1 − largest free block ÷ free in the cache).",
		"Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not in force) lets such requests reuse the space.",
	} {
		if !strings.Contains(oom, want) {
			t.Errorf("the OOM's explanation lacks %q:\n%s", want, screens["oom"])
		}
	}
	// the end row's details: tab to the summary, G the last row
	tm.waitFor("After cleanup")
	tm.keys("Tab", "G")
	scr := tm.waitForWords("selected row 3 of 3: After cleanup")
	if !strings.Contains(scr, "torch's cache at this row: 1.00 GiB free in segments, largest free block 1.00 GiB, fragmentation 0.0%") {
		t.Errorf("the end row's details should give torch's cache at it:\n%s", scr)
	}

	// the same run recorded, then exported
	rsock := filepath.Join(dir, "rec.sock")
	rec := filepath.Join(dir, "run.gputop")
	r := startRecord(t, "--source", "agent", "--socket", rsock, "-o", rec)
	waitFile(t, rsock)
	a := layoutRun(t, rsock, 5401, func(string) {})
	a.send(`{"type":"bye","t":%d}`, time.Now().UnixNano())
	r.stderr.waitFor(t, "detached")
	if code := r.stop(); code != 0 {
		t.Fatalf("record: exit %d: %s", code, r.stderr.String())
	}
	// its replay shows the cache at the cursor: at the end the newest
	// reading and the skip after it, at the row "step 1" (p: back three
	// markers) the reading with the private pool
	rt := startTerm(t, 120, 40, "--replay", rec)
	rt.waitForWords("pid 5401")
	rt.keys("End") // a recording this short ends before its replay starts playing
	end := rt.waitForWords("the newest reading was skipped: the reading would take 80 ms")
	if !strings.Contains(end, "largest free block 128.0 MiB") || strings.Contains(end, "private 1,7") {
		t.Errorf("the replay's end should show the newest reading:\n%s", end)
	}
	rt.keys("p", "p", "p")
	rt.waitForWords("selected row 1 of 1: step 1") // a replay shows the rows up to its cursor
	rt.waitForWords("pools: default 8.00 GiB, private 1,7 2.00 GiB")

	csvPath := filepath.Join(dir, "run.csv")
	out, code := run(t, "export", rec, "--csv", csvPath)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	recs := readCSV(t, csvPath)
	h := recs[0]
	at := slices.Index(h, "free_in_segments_bytes")
	if got := strings.Join(h[max(at, 0):min(at+4, len(h))], ","); at < 0 || got != "free_in_segments_bytes,largest_free_bytes,segments,graph_pools_bytes" {
		t.Fatalf("the CSV's header has %s", got)
	}
	want := map[string]string{
		"step 1":        "1073741824,268435456,13,2147483648",
		"OOM":           "6442450944,536870912,40,0",
		"After cleanup": "1073741824,1073741824,12,0",
	}
	for _, rec := range recs[1:] {
		if got := strings.Join(rec[at:at+4], ","); got != want[rec[0]] {
			t.Errorf("row %q has %s, want %s", rec[0], got, want[rec[0]])
		}
	}
	if len(recs) != 4 {
		t.Errorf("%d rows in the CSV, want 3", len(recs)-1)
	}
	for _, want := range []string{
		"pid 5401: ✓ After cleanup",
		"  torch's cache at this row: 1.00 GiB free in segments, largest free block 1.00 GiB, fragmentation 0.0%; all in the default pool; settings in force (torch's): expandable_segments:False, max_split_size_mb:512\n",
		"✗ OOM at ",
		"asked for 800.0 MiB, 300.0 MiB free on the GPU (CUDA).\n" +
			"  Measured at the OOM: 6.00 GiB free in torch's cache but its largest free block is 512.0 MiB, less than the 800.0 MiB asked: fragmentation (91.7% = 1 − largest free block ÷ free in the cache). " +
			"Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not in force) lets such requests reuse the space. ",
		"  torch's cache at the OOM: 6.00 GiB free in segments, largest free block 512.0 MiB, fragmentation 91.7%; all in the default pool; settings in force (torch's): expandable_segments:False, max_split_size_mb:512\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export's text lacks %q:\n%s", want, out)
		}
	}
}
