package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// stepLedger is a training step's ledger as an agent sends it: 1 GiB of
// parameters, grads as given, 2 GiB of optimizer state, a 64 MiB batch,
// a 32 MiB workspace, and 4 MiB no part claims, of 12 GiB reserved.
func stepLedger(t int64, grads uint64) *wire.Ledger {
	return &wire.Ledger{T: t, Allocated: 3*gib + grads + 100*mib, Reserved: 12 * gib, Params: 1 * gib, Grads: grads,
		Optimizer: 2 * gib, OtherTensors: 64 * mib, Workspace: 32 * mib, TookMS: 41}
}

// answerWalk reads gputop's next request on the agent's connection, which
// must be a holders walk of torch device 0, and answers it as the agent
// does: the walk's attribution and its ledger.
func answerWalk(t *testing.T, a *rankAgent, r *bufio.Reader, l func(int64) *wire.Ledger) {
	t.Helper()
	a.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("no request from gputop: %v", err)
	}
	var req wire.Request
	if err := json.Unmarshal(line, &req); err != nil || req.Type != wire.TypeRequest || req.What != wire.RequestHolders || req.Dev == nil || *req.Dev != 0 {
		t.Fatalf("gputop asked %q, want a holders walk of torch device 0", line)
	}
	now := time.Now().UnixNano()
	led := l(now)
	a.sendJSON(wire.Holders{Type: wire.TypeHolders, T: now, ID: req.ID, Dev: 0, Groups: []wire.HolderGroup{},
		Held: &wire.Held{T: now, Allocated: led.Allocated, Python: led.Allocated - 4*mib, Unaccounted: 4 * mib}, Ledger: led})
}

// ledgerRun plays a training process over the real socket: its counters
// at 100 Hz, a mark with a ledger after each of two steps (the second's
// activations reach 4 GiB: torch's peak counter rises), then a row taken
// with `gputop snap look` and an end row with `gputop snap "After
// cleanup"`, each answered with a walk and its ledger (grads of 1 GiB
// still there). It returns once the end row's walk is answered.
func ledgerRun(t *testing.T, sock string, pid int) *rankAgent {
	a := startRankAgent(t, sock, pid, 0)
	r := bufio.NewReader(a.c)
	const reserved = 12 * gib
	base := stepLedger(0, 0).Allocated
	var peak uint64
	counters := func(n int, alloc func(i int) uint64) {
		for i := range n {
			v := alloc(i)
			peak = max(peak, v)
			a.sendJSON(wire.Sample{Type: wire.TypeSample, T: time.Now().UnixNano(), Dev: 0, Allocated: v, Reserved: reserved, Peak: peak})
			time.Sleep(10 * time.Millisecond)
		}
	}
	mark := func(label string) {
		now := time.Now().UnixNano()
		a.sendJSON(wire.Mark{Type: wire.TypeMark, T: now, Label: label,
			Devs: []wire.DevStats{{Dev: 0, Allocated: base, Reserved: reserved, Peak: peak, Ledger: stepLedger(now, 0)}}})
	}
	counters(20, func(int) uint64 { return base })
	mark("step 1")
	counters(40, func(i int) uint64 {
		if i == 20 {
			return base + 4*gib
		}
		return base + gib
	})
	counters(5, func(int) uint64 { return base })
	mark("step 2")
	counters(5, func(int) uint64 { return base + gib })
	if out, code := run(t, "snap", "look", "--socket", sock); code != 0 {
		t.Fatalf("gputop snap look: exit %d: %s", code, out)
	}
	answerWalk(t, a, r, func(t int64) *wire.Ledger { return stepLedger(t, gib) })
	if out, code := run(t, "snap", "After cleanup", "--socket", sock); code != 0 {
		t.Fatalf("gputop snap After cleanup: exit %d: %s", code, out)
	}
	answerWalk(t, a, r, func(t int64) *wire.Ledger { return stepLedger(t, gib) })
	return a
}

// The ledger end to end through the real binary: an agent on the real
// socket sends marks with ledgers and answers the holders walks that a
// `gputop snap` row (not an end row) and an end row ask for with the
// walk's ledger. The TUI shows the selected row's ledger, its parts
// adding up to torch's reserved bytes (no NVML here: outside torch is
// said to be unknown), and the peak before a row, exact where torch's
// counter rose; /metrics serves the newest ledger's parts;
// `gputop record` keeps the ledgers and `gputop export` gives the CSV's
// nine columns and the end row's ledger and the highest peak in words.
func TestLedgerShown(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "tui.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tm := startTerm(t, 120, 40, "--source", "agent", "--socket", sock, "--metrics", addr)
	waitFile(t, sock)
	ledgerRun(t, sock, 5600)
	tm.waitFor("After cleanup")
	tm.keys("Tab", "G", "Up")
	scr := tm.waitForWords("selected row 3 of 4: look")
	for _, want := range []string{
		"= 12.00 GiB torch reserved",
		"P params 1.00 GiB G grads 1.00 GiB O optimizer state 2.00 GiB A activations 0 B T other tensors 64.0 MiB W workspaces 32.0 MiB U unattributed 4.0 MiB C cached free",
		"X outside torch unknown",
		"outside torch unknown: NVML gave no figure for the process at the walk]",
		`peak since "step 2"`,
	} {
		if !strings.Contains(scr, strings.Join(strings.Fields(want), " ")) {
			t.Errorf("the key row's ledger lacks %q:\n%s", want, tm.screen())
		}
	}
	tm.keys("Up")
	scr = tm.waitForWords("selected row 2 of 4: step 2")
	if want := `peak since "step 1": 7.10 GiB, exact (torch's peak counter rose) = persistent 3.09 GiB (ledger at "step 1") + activations and temporaries 4.00 GiB`; !strings.Contains(scr, want) {
		t.Errorf("step 2's peak: want %q:\n%s", want, tm.screen())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("the TUI at 120x40:\n%s", tm.screen())
	}

	// /metrics: the newest ledger's parts, without outside_torch
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for part, v := range map[string]uint64{"params": gib, "grads": gib, "optimizer": 2 * gib, "unattributed": 4 * mib, "cached_free": 12*gib - stepLedger(0, gib).Allocated} {
		want := fmt.Sprintf(`part="%s",pid="5600"`, part)
		line := ""
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "gputop_torch_ledger_bytes{") && strings.Contains(l, want) {
				line = l
			}
		}
		if !strings.HasSuffix(line, fmt.Sprintf(" %g", float64(v))) && !strings.HasSuffix(line, fmt.Sprintf(" %d", v)) {
			t.Errorf("/metrics' %s: %q, want %d", part, line, v)
		}
	}
	if strings.Contains(body, `part="outside_torch"`) {
		t.Error("/metrics has an outside_torch series without NVML")
	}

	// the same run recorded, then exported
	rsock := filepath.Join(dir, "rec.sock")
	rec := filepath.Join(dir, "run.gputop")
	r := startRecord(t, "--source", "agent", "--socket", rsock, "-o", rec)
	waitFile(t, rsock)
	a := ledgerRun(t, rsock, 5601)
	a.send(`{"type":"bye","t":%d}`, time.Now().UnixNano())
	r.stderr.waitFor(t, "detached")
	if code := r.stop(); code != 0 {
		t.Fatalf("record: exit %d: %s", code, r.stderr.String())
	}
	csvPath := filepath.Join(dir, "run.csv")
	out, code := run(t, "export", rec, "--csv", csvPath)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	recs := readCSV(t, csvPath)
	h := recs[0]
	at := slices.Index(h, "params_bytes")
	if at < 0 || strings.Join(h[at:min(at+9, len(h))], ",") != "params_bytes,grads_bytes,optimizer_bytes,activations_bytes,other_tensors_bytes,workspace_bytes,cached_free_bytes,outside_torch_bytes,unattributed_bytes" {
		t.Fatalf("the CSV's header: %v", h)
	}
	step := fmt.Sprintf("%d,0,%d,0,%d,%d,%d,,%d", gib, 2*gib, 64*mib, 32*mib, 12*gib-stepLedger(0, 0).Allocated, 4*mib)
	answered := fmt.Sprintf("%d,%d,%d,0,%d,%d,%d,,%d", gib, gib, 2*gib, 64*mib, 32*mib, 12*gib-stepLedger(0, gib).Allocated, 4*mib)
	want := map[string]string{"step 1": step, "step 2": step, "look": answered, "After cleanup": answered}
	for _, rec := range recs[1:] {
		if got := strings.Join(rec[at:at+9], ","); got != want[rec[0]] {
			t.Errorf("row %q's ledger cells %s, want %s", rec[0], got, want[rec[0]])
		}
	}
	if len(recs) != 5 {
		t.Errorf("%d rows in the CSV, want 4", len(recs)-1)
	}
	for _, want := range []string{
		`pid 5601: ledger at "After cleanup": params 1.00 GiB, grads 1.00 GiB, optimizer state 2.00 GiB, activations 0 B, other tensors 64.0 MiB, workspaces 32.0 MiB, unattributed 4.0 MiB, cached free 7.90 GiB, outside torch unknown = 12.00 GiB, torch's reserved (outside torch unknown: NVML gave no figure for the process at the walk)`,
		"  based on: params … workspaces: the agent's walk of live tensors at ",
		`pid 5601: highest peak, before "step 2": peak since "step 1": 7.10 GiB, exact (torch's peak counter rose) = persistent 3.09 GiB (ledger at "step 1") + activations and temporaries 4.00 GiB`,
		"  persistent: params 1.00 GiB, grads 0 B, optimizer state 2.00 GiB, other tensors 64.0 MiB, workspaces 32.0 MiB",
		"  advice: activations and temporaries 4.00 GiB are 56% of the peak 7.10 GiB: activation checkpointing or a smaller batch cuts them",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export's text lacks %q:\n%s", want, out)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("export said:\n%s", out)
	}
}
