package recording

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// A row renamed and a row deleted while recording load back renamed and
// gone, with their markers: the loaded store holds the rows the user left,
// as the live one did.
func TestRowEditsLoadBack(t *testing.T) {
	path := tempPath(t, "run.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	live := tap(store.New(liveOptions()), w)
	live.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30, Source: "nvml"})
	for i := int64(0); i < 3000; i++ {
		live.AddNVML(0, base+i*ms, uint64(100+i)<<20, 0)
	}
	for i, l := range []string{"one", "two", "three"} {
		live.TakeSnapshot(l, 0, base+int64(i+1)*500*ms, "key", nil)
	}
	if _, ok := live.EditRow(wire.RowEdit{T: base + 500*ms, Dev: 0, Label: "one", Rename: "first"}); !ok {
		t.Fatal("rename found no row")
	}
	if _, ok := live.EditRow(wire.RowEdit{T: base + 1000*ms, Dev: 0, Label: "two", Delete: true}); !ok {
		t.Fatal("delete found no row")
	}
	if _, ok := live.EditRow(wire.RowEdit{T: base + 1000*ms, Dev: 0, Label: "two", Delete: true}); ok {
		t.Fatal("a deleted row was deleted again")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readFile(t, path), []byte(`"type":"row_edit"`)); n != 2 {
		t.Fatalf("%d row_edit lines, want 2", n)
	}
	st := store.New(replayOptions())
	if _, err := Load(path, st); err != nil {
		t.Fatal(err)
	}
	var labels, marks []string
	for _, r := range st.Snapshots() {
		labels = append(labels, r.Label)
	}
	for _, m := range st.Markers() {
		marks = append(marks, m.Label)
	}
	if got := strings.Join(labels, ","); got != "first,three" {
		t.Fatalf("loaded rows %s, want first,three", got)
	}
	if got := strings.Join(marks, ","); got != "first,three" {
		t.Fatalf("loaded markers %s, want first,three", got)
	}
	if !reflect.DeepEqual(live.Snapshots(), st.Snapshots()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Snapshots()), js(st.Snapshots()))
	}
}

// A row_edit that names no row, or does neither or both, is refused with
// the line and the reason; what came before it is kept.
func TestRowEditRefused(t *testing.T) {
	for _, tc := range []struct {
		edit wire.RowEdit
		want string
	}{
		{wire.RowEdit{T: base + 5, Dev: 0, Label: "nope", Delete: true}, `names no snapshot row: none labelled "nope" of pid 0 on device 0`},
		{wire.RowEdit{T: base + 5, Dev: 0, Label: "a"}, `neither "rename" (a new label) nor "delete" given`},
		{wire.RowEdit{T: base + 5, Dev: 0, Label: "a", Rename: "b", Delete: true}, `"rename" and "delete" both given`},
	} {
		var buf bytes.Buffer
		tc.edit.Type = wire.TypeRowEdit
		writeLines(&buf, header(),
			wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30},
			wire.Snapshot{Type: wire.TypeSnapshot, T: base + 5, Label: "a", Dev: 0, Source: "key"},
			tc.edit)
		st := store.New(store.DefaultOptions())
		_, err := LoadReader("edits", &buf, st)
		fe := asFormatError(t, err)
		if !strings.Contains(fe.Error(), tc.want) || !strings.Contains(fe.Error(), "line 4") {
			t.Errorf("error %q, want line 4 and %q", fe.Error(), tc.want)
		}
		if rows := st.Snapshots(); len(rows) != 1 || rows[0].Label != "a" {
			t.Errorf("rows before the bad line: %s", js(rows))
		}
	}
}

// Twin rows (one process, device, time and label) recorded with the edits
// of the second and third load back as the live store had them.
func TestTwinRowEditsLoadBack(t *testing.T) {
	path := tempPath(t, "twins.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	live := tap(store.New(liveOptions()), w)
	live.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30, Source: "nvml"})
	live.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 7, T: base, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a"}}})
	var rows []wire.Snapshot
	for i := range 3 {
		rows = append(rows, live.AgentMark(7, wire.Mark{Type: wire.TypeMark, T: base + 5*ms, Label: "step",
			Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i + 1)}}})...)
	}
	live.AgentOOM(7, wire.OOM{Type: wire.TypeOOM, T: base + 5*ms, Dev: 0, Allocated: 9})
	live.AgentOOM(7, wire.OOM{Type: wire.TypeOOM, T: base + 5*ms, Dev: 0, Allocated: 10})
	oom := live.Snapshots()[4]
	for _, e := range []wire.RowEdit{
		{ID: rows[1].ID, T: base + 5*ms, PID: 7, Label: "step", Delete: true},
		{ID: rows[2].ID, T: base + 5*ms, PID: 7, Label: "step", Rename: "third"},
		{ID: oom.ID, T: base + 5*ms, PID: 7, Label: wire.LabelOOM, Rename: "second OOM"},
	} {
		if _, ok := live.EditRow(e); !ok {
			t.Fatalf("edit %+v found no row", e)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := store.New(replayOptions())
	if _, err := Load(path, st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range st.Snapshots() {
		got = append(got, fmt.Sprintf("%s=%d", r.Label, *r.Allocated))
	}
	if s := strings.Join(got, ","); s != "step=1,third=3,OOM=9,second OOM=10" {
		t.Fatalf("loaded rows %s", s)
	}
	if !reflect.DeepEqual(live.Snapshots(), st.Snapshots()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Snapshots()), js(st.Snapshots()))
	}
}

// Recordings joined with cat each name their rows with ids of their own:
// an edit in the second names the second's row, never the first's.
func TestJoinedRecordingsKeepTheirRowIDs(t *testing.T) {
	var joined []byte
	for i, label := range []string{"first", "second"} {
		path := tempPath(t, label+".gputop")
		w, err := Create(path, header())
		if err != nil {
			t.Fatal(err)
		}
		live := tap(store.New(liveOptions()), w)
		live.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30, Source: "nvml"})
		r := live.TakeSnapshot(label, 0, base+int64(i+1)*ms, "key", nil)[0]
		if i == 1 {
			if _, ok := live.EditRow(wire.RowEdit{ID: r.ID, T: r.T, Label: label, Rename: "second, renamed"}); !ok {
				t.Fatal("no row")
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		joined = append(joined, readFile(t, path)...)
	}
	st := store.New(replayOptions())
	if _, err := LoadReader("joined", bytes.NewReader(joined), st); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range st.Snapshots() {
		labels = append(labels, r.Label)
	}
	if got := strings.Join(labels, ","); got != "first,second, renamed" {
		t.Fatalf("rows %s", got)
	}
}
