package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// The real `gputop record` fed by many agents over its real socket, whose
// hellos bring more unknown GPUs than store.MaxDevices: the devices past
// the limit are not added (the recorder says which, naming the process),
// and `gputop export` reads every row of the recording, including those
// of agents that came after the limit was reached.
func TestRecordedPastMaxDevicesExportsEveryRow(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "gputop.sock")
	rec := filepath.Join(dir, "many.gputop")
	r := startRecord(t, "--source", "agent", "--socket", sock, "-o", rec)
	waitFile(t, sock)

	// 30 agents with 40 new GPUs each (1200 > 1024), then 5 on GPUs the
	// first ones brought; each marks a snapshot on all its GPUs
	rows := 0
	for a := 0; a < 35; a++ {
		uuids := make([]string, 40)
		for i := range uuids {
			uuids[i] = fmt.Sprintf("GPU-e2e-%d-%d", a, i)
			if a >= 30 {
				uuids[i] = fmt.Sprintf("GPU-e2e-%d-%d", a-30, i)
			}
		}
		fakeAgent(t, sock, 3000+a, uuids)
		if a < 25 || a >= 30 {
			rows += 40 // room for all of them
		} else if a == 25 {
			rows += store.MaxDevices - 25*40
		}
	}
	// the recorder prints agents' events as it goes: wait for the last one
	r.stderr.waitFor(t, "pid 3034 (train.py): detached")
	if code := r.stop(); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, r.stderr.String())
	}
	msg := r.stderr.String()
	if !strings.Contains(msg, "pid 3025 (train.py): cuda:24, cuda:25, cuda:26") || !strings.Contains(msg, "not added: gputop keeps at most 1024 devices") {
		t.Fatalf("recorder did not say which devices found no room:\n%.3000s", msg)
	}
	if !strings.Contains(msg, fmt.Sprintf("%d rows", rows)) {
		t.Fatalf("recorder kept a different number of rows than %d:\n%.3000s", rows, msg[max(len(msg)-500, 0):])
	}

	out := filepath.Join(dir, "many.csv")
	text, code := run(t, "export", rec, "--csv", out)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, text)
	}
	csv := readCSV(t, out)
	if len(csv)-1 != rows {
		t.Fatalf("export read %d of the %d rows recorded: %s", len(csv)-1, rows, text)
	}
	if last := csv[len(csv)-1]; last[0] != "m34" || last[2] != "199" {
		t.Fatalf("last row %v: want m34 on device 199 (the last agent, on GPUs of agent 4)", last)
	}
	t.Logf("35 agents naming 1200 GPUs: %d devices kept, %d rows recorded and exported", store.MaxDevices, rows)
}

// fakeAgent attaches as pid with one torch device per UUID, marks a
// snapshot on all of them, says bye and waits until gputop closes the
// connection.
func fakeAgent(t *testing.T, sock string, pid int, uuids []string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Now().UnixNano()
	h := wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"/srv/train.py"}, Devices: []wire.AgentDevice{}, T: now}
	m := wire.Mark{Type: wire.TypeMark, T: now + 1, Label: fmt.Sprintf("m%d", pid-3000)}
	for i, u := range uuids {
		h.Devices = append(h.Devices, wire.AgentDevice{Index: i, UUID: u, Name: "Fake GPU", Total: 80 << 30})
		m.Devs = append(m.Devs, wire.DevStats{Dev: i, Allocated: uint64(i) << 20, Reserved: 2 << 30, Peak: 3 << 30})
	}
	enc := json.NewEncoder(c)
	for _, f := range []any{h, m, wire.Bye{Type: wire.TypeBye, T: now + 2}} {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(c).ReadBytes('\n'); len(line) > 0 || os.IsTimeout(err) {
		t.Fatalf("pid %d: gputop answered %q (%v) instead of closing after bye", pid, line, err)
	}
}
