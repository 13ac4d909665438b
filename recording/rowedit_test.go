package recording

import (
	"bytes"
	"fmt"
	"os"
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
	for _, r := range st.Rows() {
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
	if !reflect.DeepEqual(live.Rows(), st.Rows()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Rows()), js(st.Rows()))
	}
}

// A row_edit that does neither or both is refused with the line and the
// reason; what came before it is kept.
func TestRowEditRefused(t *testing.T) {
	for _, tc := range []struct {
		edit wire.RowEdit
		want string
	}{
		{wire.RowEdit{T: base + 5, Dev: 0, Label: "a"}, `neither "rename" (a new label) nor "delete" given`},
		{wire.RowEdit{T: base + 5, Dev: 0, Label: "a", Rename: "b", Delete: true}, `"rename" and "delete" both given`},
	} {
		var buf bytes.Buffer
		tc.edit.Type = wire.TypeRowEdit
		writeLines(&buf, header(),
			wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30},
			wire.Row{Type: wire.TypeRow, T: base + 5, Label: "a", Dev: 0, Source: "key"},
			tc.edit)
		st := store.New(store.DefaultOptions())
		_, err := LoadReader("edits", &buf, st)
		fe := asFormatError(t, err)
		if !strings.Contains(fe.Error(), tc.want) || !strings.Contains(fe.Error(), "line 4") {
			t.Errorf("error %q, want line 4 and %q", fe.Error(), tc.want)
		}
		if rows := st.Rows(); len(rows) != 1 || rows[0].Label != "a" {
			t.Errorf("rows before the bad line: %s", js(rows))
		}
	}
}

// A writer that could not write a row (its output fell behind) does not
// write the user's later edit of that row either: it counts the edit as
// dropped, and the recording loads to its end, with the edits of the rows
// it has.
func TestWriterDropsEditsOfRowsItDropped(t *testing.T) {
	path := tempPath(t, "run.gputop")
	w := NewWriter(header())
	live := tap(store.New(liveOptions()), w)
	live.SetDevice(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30, Source: "nvml"})
	live.TakeSnapshot("kept", 0, base+1*ms, "key", nil)
	// before Start the writer queues up to maxQueue lines, as it does
	// behind an output that does not keep up; past them it drops
	for i := 0; w.Stats().DroppedFrames == 0; i++ {
		live.SetProcs(0, base+2*ms+int64(i), nil)
	}
	live.TakeSnapshot("lost", 0, base+3*ms, "key", nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(f, path); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	before := w.Stats().DroppedFrames
	// the output keeps up again; the user renames both rows
	if _, ok := live.EditRow(wire.RowEdit{T: base + 3*ms, Dev: 0, Label: "lost", Rename: "lost, renamed"}); !ok {
		t.Fatal("the live store has no row lost")
	}
	if _, ok := live.EditRow(wire.RowEdit{T: base + 1*ms, Dev: 0, Label: "kept", Rename: "kept, renamed"}); !ok {
		t.Fatal("the live store has no row kept")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d := w.Stats().DroppedFrames - before; d != 1 {
		t.Fatalf("%d frames dropped after the output kept up, want 1 (the edit of the row not written)", d)
	}
	if n := bytes.Count(readFile(t, path), []byte(`"type":"row_edit"`)); n != 1 {
		t.Fatalf("%d row_edit lines, want 1", n)
	}
	st := store.New(replayOptions())
	info, err := Load(path, st)
	if err != nil {
		t.Fatalf("the recording does not load to its end: %v", err)
	}
	if rows := st.Rows(); len(rows) != 1 || rows[0].Label != "kept, renamed" {
		t.Fatalf("loaded rows %s", js(rows))
	}
	if !info.Dropped.Any() {
		t.Fatal("the recording does not say what was dropped")
	}
}

// A row_edit whose row the recording lacks is skipped with a warning
// naming its line, whether the recorder dropped lines before it (the row
// likely among them) or not; the lines after it load.
func TestLoadSkipsEditsOfMissingRows(t *testing.T) {
	row := func(id uint64, ms_ int64, label string) wire.Row {
		return wire.Row{Type: wire.TypeRow, ID: id, T: base + ms_*ms, Label: label, Dev: 0, Source: "key"}
	}
	edit := func(id uint64, ms_ int64, label, rename string) wire.RowEdit {
		return wire.RowEdit{Type: wire.TypeRowEdit, ID: id, T: base + ms_*ms, Dev: 0, Label: label, Rename: rename}
	}
	for _, tc := range []struct {
		name    string
		dropped bool
		missing wire.RowEdit
		why     string
	}{
		{"dropped before", true, edit(3, 3, "c", "C"), "the recorder dropped 1 other frame before this line"},
		{"nothing dropped", false, edit(3, 3, "c", "C"), "the recording has no such row before it"},
		{"an edit without an id", false, edit(0, 3, "c", "C"), "the recording has no such row before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			frames := []any{header(), wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30},
				row(1, 1, "a"), row(2, 2, "b")}
			if tc.dropped {
				frames = append(frames, Dropped{Type: TypeDropped, T: base + 3*ms, Drops: Drops{Frames: 1}})
			}
			frames = append(frames, tc.missing, edit(2, 2, "b", "B"), row(4, 4, "d"))
			writeLines(&buf, frames...)
			line := len(frames) - 2
			st := store.New(store.DefaultOptions())
			info, err := LoadReader("edits", &buf, st)
			if err != nil {
				t.Fatalf("the recording does not load to its end: %v", err)
			}
			var labels []string
			for _, r := range st.Rows() {
				labels = append(labels, r.Label)
			}
			if got := strings.Join(labels, ","); got != "a,B,d" {
				t.Fatalf("rows %s, want a,B,d", got)
			}
			if info.Warned != 1 || len(info.Warnings) != 1 {
				t.Fatalf("warnings %d %q", info.Warned, info.Warnings)
			}
			w := info.Warnings[0]
			for _, want := range []string{fmt.Sprintf("edits: line %d: skipped a row_edit", line), `rename of the row "c"`, tc.why} {
				if !strings.Contains(w, want) {
					t.Errorf("warning %q lacks %q", w, want)
				}
			}
		})
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
	var rows []wire.Row
	for i := range 3 {
		rows = append(rows, live.AgentMark(7, wire.Mark{Type: wire.TypeMark, T: base + 5*ms, Label: "step",
			Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i + 1)}}})...)
	}
	live.AgentOOM(7, wire.OOM{Type: wire.TypeOOM, T: base + 5*ms, Dev: 0, Allocated: 9})
	live.AgentOOM(7, wire.OOM{Type: wire.TypeOOM, T: base + 5*ms, Dev: 0, Allocated: 10})
	oom := live.Rows()[4]
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
	for _, r := range st.Rows() {
		got = append(got, fmt.Sprintf("%s=%d", r.Label, *r.Allocated))
	}
	if s := strings.Join(got, ","); s != "step=1,third=3,OOM=9,second OOM=10" {
		t.Fatalf("loaded rows %s", s)
	}
	if !reflect.DeepEqual(live.Rows(), st.Rows()) {
		t.Fatalf("rows differ:\n live   %s\n loaded %s", js(live.Rows()), js(st.Rows()))
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
	for _, r := range st.Rows() {
		labels = append(labels, r.Label)
	}
	if got := strings.Join(labels, ","); got != "first,second, renamed" {
		t.Fatalf("rows %s", got)
	}
}

// A store that keeps fewer rows than a recording has loads its edits of
// the rows it keeps; the edits of rows it let go are skipped, counted,
// with the first warnings kept.
func TestLoadEditsPastMaxRows(t *testing.T) {
	var buf bytes.Buffer
	frames := []any{header(), wire.Device{Type: wire.TypeDevice, Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30}}
	const n = 5000
	for i := range n {
		frames = append(frames, wire.Row{Type: wire.TypeRow, ID: uint64(i + 1), T: base + int64(i)*ms, Label: "r", Dev: 0, Source: "key"})
	}
	for i := range n {
		frames = append(frames, wire.RowEdit{Type: wire.TypeRowEdit, ID: uint64(i + 1), T: base + int64(i)*ms, Label: "r", Rename: fmt.Sprint(i)})
	}
	writeLines(&buf, frames...)
	opt := replayOptions()
	opt.MaxRows = 100
	st := store.New(opt)
	info, err := LoadReader("many", &buf, st)
	if err != nil {
		t.Fatal(err)
	}
	rows := st.Rows()
	if len(rows) > 100 || rows[len(rows)-1].Label != fmt.Sprint(n-1) || rows[0].Label != "0" {
		t.Fatalf("%d rows kept, first %q, last %q", len(rows), rows[0].Label, rows[len(rows)-1].Label)
	}
	for _, r := range rows {
		if r.Label == "r" {
			t.Fatalf("a row kept was not renamed: %s", js(r))
		}
	}
	if info.Warned != n-len(rows) || len(info.Warnings) != maxWarnings || !strings.Contains(info.Warnings[0], "no longer kept (gputop keeps the newest 100 rows)") {
		t.Fatalf("%d warnings (%d rows kept), first %q", info.Warned, len(rows), info.Warnings[0])
	}
}
