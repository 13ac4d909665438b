package recording

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// A dump named by a mark and by an OOM reaches the row, the recording, the
// rows loaded back and the CSV's last column; its text is made printable,
// and what failed is logged with its reason.
func TestDumpsReferencedByRowsAndCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	st := tap(newLogged(liveOptions()), w)
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: 150 << 30, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 42, T: base, History: 100000,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200"}}})
	labelled := "/runs/d/42-Epoch_2-20261201-111500.123.pickle"
	st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: base + ms, Label: "Epoch 2",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 20}},
		Dump: &wire.Dump{Path: labelled, Bytes: 151914, TookMS: 12.5, GILMS: 4.25}})
	st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: base + 2*ms, Label: "full",
		Devs: []wire.DevStats{{Dev: 0, Allocated: 1 << 20}},
		Dump: &wire.Dump{Error: "/runs/d/.x.tmp: No space left on device"}})
	oom := "/runs/d/42-OOM-\x1b]0;pwned\x07.pickle"
	st.AgentOOM(42, wire.OOM{Type: wire.TypeOOM, T: base + 3*ms, Dev: 0, Requested: 8 << 30,
		Dump: &wire.Dump{Path: oom, Bytes: 191628, Removed: []string{"/runs/d/old.pickle"}}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	logs := strings.Join(logOf(st.Store).Lines(), "\n")
	for _, want := range []string{
		`pid 42: memory dump at "Epoch 2": ` + labelled + " (0.1 MiB; 12 ms, GIL held 4 ms)",
		`pid 42: no memory dump at "full": /runs/d/.x.tmp: No space left on device`,
		`1 older removed to stay within the bounds: /runs/d/old.pickle`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.ContainsRune(logs, 0x1b) {
		t.Errorf("an escape sequence from a dump's path reached the log:\n%q", logs)
	}

	back := store.New(replayOptions())
	if _, err := Load(path, back); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*store.Store{"live": st.Store, "loaded": back} {
		rows := s.Rows()
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want 3", name, len(rows))
		}
		got := []string{}
		for _, r := range rows {
			if r.Dump == nil {
				got = append(got, "")
				continue
			}
			got = append(got, r.Dump.Path)
		}
		cleanOOM := store.CleanText(oom)
		if !slices.Equal(got, []string{labelled, "", cleanOOM}) {
			t.Errorf("%s: rows' dumps %q", name, got)
		}
		recs := summary.Records(rows, s.Devices())
		col := slices.Index(recs[0], "dump")
		if col < 0 {
			t.Fatalf("%s: no dump column in %v", name, recs[0])
		}
		if recs[1][col] != labelled || recs[2][col] != "" || recs[3][col] != cleanOOM {
			t.Errorf("%s: CSV dump cells %q %q %q", name, recs[1][col], recs[2][col], recs[3][col])
		}
	}
	if a := back.Agents(); len(a) != 1 || a[0].Hello.History != 100000 {
		t.Errorf("the hello's history did not load back: %+v", a)
	}
}

func TestDumpNeedsPathOrError(t *testing.T) {
	err := wire.Check(wire.Mark{T: 1, Label: "x", Dump: &wire.Dump{Bytes: 3}})
	if err == nil || !strings.Contains(err.Error(), `"dump" has neither a "path" nor an "error"`) {
		t.Errorf("a dump naming nothing: %v", err)
	}
	if err := wire.Check(wire.OOM{T: 1, Dump: &wire.Dump{Error: "disk full"}}); err != nil {
		t.Errorf("a dump that failed: %v", err)
	}
}
