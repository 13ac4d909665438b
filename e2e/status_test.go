package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// gputop status with no gputop running and no NVML (no driver here):
// exit 1, nothing on standard output, and a message naming both.
func TestStatusWithoutGputopOrNVML(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{{"status", "--json"}, {"status"}} {
		cmd := exec.Command(binary, append(args, "--socket", sock)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("%v: %v, stderr:\n%s", args, err, stderr.String())
		}
		msg := stderr.String()
		if stdout.Len() != 0 || !strings.Contains(msg, "no gputop is running: nothing listens on "+sock) ||
			!strings.Contains(msg, "NVML cannot be read") || !strings.Contains(msg, "libnvidia-ml.so") || strings.Count(msg, "\n") != 1 {
			t.Fatalf("%v: stdout %q, stderr:\n%s", args, stdout.String(), msg)
		}
	}
	if out, code := run(t, "status", "extra"); code != 2 || !strings.Contains(out, `unexpected argument "extra"`) {
		t.Fatalf("status extra: exit %d: %s", code, out)
	}
}

// statusJSON runs gputop status --json against sock and decodes its
// output into the report's Go types, a field they do not have refused.
func statusJSON(t *testing.T, sock string) (wire.StatusReport, []byte) {
	t.Helper()
	out, err := exec.Command(binary, "status", "--json", "--socket", sock).Output()
	if err != nil {
		t.Fatalf("gputop status --json: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var r wire.StatusReport
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding gputop status --json: %v\n%s", err, out)
	}
	return r, out
}

// statusScene starts a gputop (serve) and a fake agent that sends
// counters, a layout reading, rows (one with a ledger and a limit, an end
// row with its holders walk) and an OOM; it returns the socket and gputop
// status --json's report once the OOM is in it.
func statusScene(t *testing.T) (string, wire.StatusReport, []byte) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	startServe(t, dir, sock)
	enc := rowAgent(t, sock, 1)
	const gib = uint64(1) << 30
	at := time.Now().UnixNano()
	frames := []any{
		wire.Sample{Type: wire.TypeSample, T: at, Dev: 0, Allocated: 3 * gib, Reserved: 4 * gib, Peak: 5 * gib, AllocRetries: 2},
		wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: wire.Layout{T: at + 1, Segments: 5, Blocks: 9, Reserved: 4 * gib,
			Allocated: 3 * gib, FreeInSegments: gib, LargestFree: gib / 4}},
		wire.Mark{Type: wire.TypeMark, T: at + 2, Label: "Training start", Devs: []wire.DevStats{{Dev: 0, Allocated: 3 * gib,
			Reserved: 4 * gib, Peak: 5 * gib, Limit: 40 * gib,
			Ledger: &wire.Ledger{T: at + 2, Allocated: 3 * gib, Reserved: 4 * gib, Params: gib, Grads: gib, Optimizer: gib / 2}}}},
		wire.Mark{Type: wire.TypeMark, T: at + 3, Label: "After cleanup", Devs: []wire.DevStats{{Dev: 0, Allocated: gib,
			Reserved: 4 * gib, Peak: 5 * gib, Held: &wire.Held{T: at + 3, Allocated: gib, Python: gib,
				Top: []wire.HolderGroup{{Kind: "variable", Name: "losses", Bytes: gib, Tensors: 4}}}}}},
		wire.OOM{Type: wire.TypeOOM, T: at + 4, Dev: 0, Requested: 2 * gib, Free: gib / 2, Allocated: 30 * gib, Reserved: 39 * gib, Peak: 39 * gib},
	}
	for _, f := range frames {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	var r wire.StatusReport
	var raw []byte
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r, raw = statusJSON(t, sock); len(r.OOMs) == 1 {
			return sock, r, raw
		}
		if time.Now().After(end) {
			t.Fatalf("the OOM never showed:\n%s", raw)
		}
	}
}

// A running gputop with a fake agent that sent counters, a layout
// reading, rows (one with a ledger and a limit, an end row with its
// holders walk) and an OOM: gputop status --json carries those exact
// figures, and the text form shows them.
func TestStatusFromRunningGputop(t *testing.T) {
	sock, r, raw := statusScene(t)
	const gib = uint64(1) << 30
	if r.Version != 1 || r.Source != "gputop" || r.Socket != sock || len(r.Devices) != 1 || len(r.Agents) != 1 || len(r.Rows) != 3 {
		t.Fatalf("report:\n%s", raw)
	}
	if d := r.Devices[0]; d.UUID != "GPU-fake-0" || d.From != "agent" || d.Total == nil || *d.Total != 80*gib || d.Used != nil {
		t.Errorf("device:\n%s", raw)
	}
	a := r.Agents[0]
	if a.PID != 4242 || a.Name != "train.py" || !a.Connected || len(a.Devices) != 1 {
		t.Fatalf("agent:\n%s", raw)
	}
	ad := a.Devices[0]
	if *ad.Allocated != 3*gib || *ad.Reserved != 4*gib || *ad.Peak != 5*gib || *ad.AllocRetries != 2 || ad.Limit == nil || *ad.Limit != 40*gib {
		t.Errorf("agent's counters:\n%s", raw)
	}
	if l := ad.Layout; l == nil || l.Segments != 5 || l.LargestFree != gib/4 || l.Fragmentation != 0.75 {
		t.Errorf("layout:\n%s", raw)
	}
	if l := ad.Ledger; l == nil || l.Row != r.Rows[0].ID || len(l.Parts) != 9 || *l.Parts[0].Bytes != gib || *l.Parts[2].Bytes != gib/2 {
		t.Errorf("ledger:\n%s", raw)
	}
	end := r.Rows[1]
	if end.Label != "After cleanup" || !end.End || end.Verdict == nil || end.Verdict.Status != "held" || end.Verdict.Mark != "✗" ||
		!strings.Contains(end.Verdict.Text, "losses") {
		t.Errorf("end row:\n%s", raw)
	}
	o := r.OOMs[0]
	if o.PID != 4242 || o.Row != r.Rows[2].ID || *o.Requested != 2*gib || *o.Free != gib/2 || o.Allocated != 30*gib ||
		o.Explanation == nil || !strings.Contains(o.Explanation.Asked, "asked for 2.00 GiB") || o.Explanation.Cause == "" {
		t.Errorf("OOM:\n%s", raw)
	}
	if r.ProcessesWhy == "" || len(r.Processes) != 0 {
		t.Errorf("processes without NVML:\n%s", raw)
	}

	out, err := exec.Command(binary, "status", "--socket", sock).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"from the running gputop at " + sock, "Fake GPU", "train.py", "3.00 GiB", "40.00 GiB",
		"After cleanup", "✗ held", "asked for 2.00 GiB"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the text form lacks %q:\n%s", want, out)
		}
	}
}
