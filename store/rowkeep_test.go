package store

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// agentStore has device 0 and agent pid 9 on it (cuda:i = GPU i for the
// devices given).
func agentStore(opt Options, devs int) (*Store, *[]string) {
	var log []string
	opt.Log = func(l string) { log = append(log, l) }
	st := New(opt)
	h := wire.Hello{Type: wire.TypeHello, V: 1, PID: 9, T: 1}
	for i := range devs {
		uuid := fmt.Sprintf("GPU-%d", i)
		st.SetDevice(Device{Index: i, UUID: uuid, Name: "g", Total: 1 << 30})
		h.Devices = append(h.Devices, wire.AgentDevice{Index: i, UUID: uuid})
	}
	st.AgentHello(h)
	return st, &log
}

func twinMark(st *Store, t int64, label string, allocs ...uint64) []wire.Row {
	var rows []wire.Row
	for _, a := range allocs {
		rows = append(rows, st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: t, Label: label,
			Devs: []wire.DevStats{{Dev: 0, Allocated: a}}})...)
	}
	return rows
}

func allocs(rows []wire.Row) []uint64 {
	var out []uint64
	for _, r := range rows {
		out = append(out, *r.Allocated)
	}
	return out
}

// Two rows of one process on one device at one time with one label are
// two rows: an edit by ID changes the one it names, and its marker with
// it. An edit without an ID (a recording made before ids) names the first.
func TestEditRowTwins(t *testing.T) {
	st, _ := agentStore(DefaultOptions(), 1)
	rows := twinMark(st, 100*ms, "step", 1, 2, 3)
	if rows[0].ID == 0 || rows[0].ID == rows[1].ID || rows[1].ID == rows[2].ID {
		t.Fatalf("row ids %d %d %d", rows[0].ID, rows[1].ID, rows[2].ID)
	}
	second := wire.RowEdit{ID: rows[1].ID, T: 100 * ms, Dev: 0, PID: 9, Label: "step", Delete: true}
	if old, e, ok := st.EditRow(second); !ok || *old.Allocated != 2 || e.ID != rows[1].ID {
		t.Fatalf("delete of the second: %v %+v", ok, old)
	}
	if got := allocs(st.Rows()); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("after deleting the second twin: %v, want [1 3]", got)
	}
	if _, _, ok := st.EditRow(second); ok {
		t.Fatal("a deleted row was deleted again")
	}
	if _, _, ok := st.EditRow(wire.RowEdit{ID: rows[2].ID, T: 100 * ms, Dev: 0, PID: 9, Label: "step", Rename: "third"}); !ok {
		t.Fatal("rename of the third found nothing")
	}
	// the ID names the row only with its time, device, process and label
	for _, e := range []wire.RowEdit{
		{ID: rows[0].ID, T: 100*ms + 1, Dev: 0, PID: 9, Label: "step", Delete: true},
		{ID: rows[0].ID, T: 100 * ms, Dev: 1, PID: 9, Label: "step", Delete: true},
		{ID: rows[0].ID, T: 100 * ms, Dev: 0, PID: 8, Label: "step", Delete: true},
		{ID: rows[0].ID, T: 100 * ms, Dev: 0, PID: 9, Label: "third", Delete: true},
	} {
		if _, _, ok := st.EditRow(e); ok {
			t.Errorf("edit %+v found a row", e)
		}
	}
	var labels []string
	for _, m := range st.Markers() {
		labels = append(labels, fmt.Sprintf("%s#%d", m.Label, m.Row))
	}
	if want := []string{fmt.Sprintf("step#%d", rows[0].ID), fmt.Sprintf("third#%d", rows[2].ID)}; !slices.Equal(labels, want) {
		t.Fatalf("markers %v, want %v", labels, want)
	}
	// without an ID: the first row that fits, in time order
	twinMark(st, 200*ms, "again", 4, 5)
	if old, _, ok := st.EditRow(wire.RowEdit{T: 200 * ms, Dev: 0, PID: 9, Label: "again", Delete: true}); !ok || *old.Allocated != 4 {
		t.Fatalf("delete without an id: %v %+v", ok, old)
	}
	if got := allocs(st.Rows()); !slices.Equal(got, []uint64{1, 3, 5}) {
		t.Fatalf("rows %v, want [1 3 5]", got)
	}
}

// The rows, their markers and counts stay what a plain list of rows would
// give, through rows added out of time order, renames and deletes (holes
// taken out together) and the bound on rows.
func TestRowsFollowAModel(t *testing.T) {
	for _, maxRows := range []int{DefaultMaxRows, 40} {
		rng := rand.New(rand.NewSource(int64(maxRows)))
		opt := DefaultOptions()
		opt.MaxRows = maxRows
		st := New(opt)
		st.SetDevice(Device{Index: 0, UUID: "GPU-0", Name: "g", Total: 1 << 30})
		st.SetDevice(Device{Index: 1, UUID: "GPU-1", Name: "g", Total: 1 << 30})
		var model []wire.Row // what the store should hold, in its order
		dropped := uint64(0)
		for step := range 1500 {
			switch op := rng.Intn(10); {
			case op < 5 || len(model) == 0:
				r := st.AddRow(wire.Row{T: int64(1 + rng.Intn(200)), Label: fmt.Sprintf("r%d", step),
					Dev: rng.Intn(2), PID: rng.Intn(3), Source: "key", End: rng.Intn(8) == 0})
				i, _ := slices.BinarySearchFunc(model, r.T+1, func(m wire.Row, t int64) int { return int(m.T - t) })
				for i < len(model) && model[i].T <= r.T {
					i++
				}
				model = slices.Insert(model, i, r)
			default:
				i := rng.Intn(len(model))
				r := model[i]
				e := wire.RowEdit{ID: r.ID, T: r.T, Dev: r.Dev, PID: r.PID, Label: r.Label}
				if op < 8 {
					e.Delete = true
					model = slices.Delete(model, i, i+1)
				} else {
					e.Rename = fmt.Sprintf("renamed %d", step)
					model[i].Label = e.Rename
				}
				if _, _, ok := st.EditRow(e); !ok {
					t.Fatalf("step %d: the edit of row %d found nothing", step, r.ID)
				}
			}
			// the bound: keep the rows the store kept (the model cannot
			// guess which), and check they are within it
			if b := st.Bounds(); b.RowsDropped != dropped {
				kept := map[uint64]bool{}
				for _, r := range st.Rows() {
					kept[r.ID] = true
				}
				model = slices.DeleteFunc(model, func(r wire.Row) bool { return !kept[r.ID] })
				dropped = b.RowsDropped
			}
			if got := st.Rows(); !slices.Equal(rowKeys(got), rowKeys(model)) {
				t.Fatalf("max %d step %d: rows\n%v\nwant\n%v", maxRows, step, ids(got), ids(model))
			}
			if n := len(model); n > maxRows {
				t.Fatalf("step %d: %d rows kept, the bound is %d", step, n, maxRows)
			}
			at := int64(rng.Intn(210))
			want := 0
			for _, r := range model {
				if r.T <= at {
					want++
				}
			}
			if got := st.CountRows(at); got != want {
				t.Fatalf("step %d: CountRows(%d) = %d, want %d", step, at, got, want)
			}
			if got := st.CountMarkers(at); got != want {
				t.Fatalf("step %d: CountMarkers(%d) = %d, want %d", step, at, got, want)
			}
			var marks []Marker
			for i := range model {
				marks = append(marks, rowMarker(&model[i]))
			}
			if got := st.Markers(); !slices.Equal(got, marks) {
				t.Fatalf("step %d: markers differ from the rows", step)
			}
			if got, want := st.LastRows(3), model[max(len(model)-3, 0):]; !slices.Equal(rowKeys(got), rowKeys(want)) {
				t.Fatalf("step %d: last rows %v, want %v", step, ids(got), ids(want))
			}
			if sh := st.Shape(); sh.RowCount != len(model) || sh.Markers != len(model) {
				t.Fatalf("step %d: shape %+v, %d rows", step, sh, len(model))
			}
		}
		if maxRows < 100 && dropped == 0 {
			t.Fatalf("max %d: the bound never bit", maxRows)
		}
	}
}

// rowKey is what tells rows apart in a comparison.
type rowKey struct {
	id       uint64
	t        int64
	label    string
	dev, pid int
	end      bool
}

func rowKeys(rows []wire.Row) []rowKey {
	out := make([]rowKey, len(rows))
	for i, r := range rows {
		out[i] = rowKey{r.ID, r.T, r.Label, r.Dev, r.PID, r.End}
	}
	return out
}

func ids(rows []wire.Row) []uint64 {
	var out []uint64
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

// Past MaxRows the oldest rows go, plain rows first: each process's first
// row on a device and the end rows stay while others can go. It is
// counted, logged once, and edits by ID still find the rows kept.
func TestMaxRowsDropsOldestPlainRows(t *testing.T) {
	opt := DefaultOptions()
	opt.MaxRows = 32
	st, log := agentStore(opt, 1)
	for i := range 200 {
		end := i%50 == 49
		st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: int64(i+1) * ms, Label: fmt.Sprintf("m%03d", i), End: &end,
			Devs: []wire.DevStats{{Dev: 0, Allocated: uint64(i)}}})
	}
	rows := st.Rows()
	if len(rows) > 32 {
		t.Fatalf("%d rows kept, bound 32", len(rows))
	}
	var labels []string
	for _, r := range rows {
		labels = append(labels, r.Label)
	}
	got := strings.Join(labels, ",")
	for _, keep := range []string{"m000", "m049", "m099", "m149", "m199"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%s was dropped (the first row, end rows stay): %s", keep, got)
		}
	}
	if strings.Contains(got, "m001,") {
		t.Errorf("an old plain row stayed while newer ones are kept: %s", got)
	}
	b := st.Bounds()
	if b.MaxRows != 32 || b.RowsDropped != uint64(200-len(rows)) {
		t.Fatalf("bounds %+v with %d rows kept of 200", b, len(rows))
	}
	if n := strings.Count(strings.Join(*log, "\n"), "more than 32 rows"); n != 1 {
		t.Fatalf("the bound was logged %d times: %q", n, *log)
	}
	last := rows[len(rows)-2]
	if _, _, ok := st.EditRow(wire.RowEdit{ID: last.ID, T: last.T, Dev: 0, PID: 9, Label: last.Label, Rename: "kept"}); !ok {
		t.Fatal("an edit by ID found nothing after rows were dropped")
	}
	if st.Shape().RowsMade != 200 {
		t.Fatalf("rows made %d, want 200", st.Shape().RowsMade)
	}
}

// A label past wire.MaxLabelBytes is cut where it comes in, visibly, and
// counted; a mark lists more devices than wire.MaxMarkRows: the devices
// past it get no row, counted. Each bound is logged the first time.
func TestLabelAndMarkBounds(t *testing.T) {
	st, log := agentStore(DefaultOptions(), 100)
	long := strings.Repeat("é", 1<<19) // 1 MiB
	devs := make([]wire.DevStats, 100)
	for i := range devs {
		devs[i] = wire.DevStats{Dev: i, Allocated: uint64(i)}
	}
	dump := &wire.Dump{Path: "/tmp/d.pickle", Removed: []string{strings.Repeat("x", 100_000)}}
	rows := st.AgentMark(9, wire.Mark{Type: wire.TypeMark, T: 10 * ms, Label: long, Devs: devs, Dump: dump})
	if len(rows) != wire.MaxMarkRows {
		t.Fatalf("%d rows from a mark of 100 devices, want %d", len(rows), wire.MaxMarkRows)
	}
	r := rows[0]
	if len(r.Label) > wire.MaxLabelBytes || !strings.HasSuffix(r.Label, wire.LabelCut) || !strings.HasPrefix(r.Label, "éé") {
		t.Fatalf("label of %d bytes: %q", len(r.Label), r.Label)
	}
	if r.Dump == nil || r.Dump.Path != "/tmp/d.pickle" || r.Dump.Removed != nil {
		t.Fatalf("the row's dump %+v", r.Dump)
	}
	st.AddRow(wire.Row{T: 20 * ms, Label: long, Source: "key"})
	row := st.Rows()[len(st.Rows())-1]
	if _, _, ok := st.EditRow(wire.RowEdit{ID: row.ID, T: row.T, Label: long, Rename: long}); !ok {
		t.Fatal("the row was not found by its long label")
	}
	if b := st.Bounds(); b.LabelsCut != 3 || b.MarkDevs != 100-wire.MaxMarkRows {
		t.Fatalf("bounds %+v, want 3 labels cut and %d devices without a row", b, 100-wire.MaxMarkRows)
	}
	all := strings.Join(*log, "\n")
	if strings.Count(all, "wire.MaxLabelBytes") != 1 || strings.Count(all, "wire.MaxMarkRows") != 1 {
		t.Fatalf("log %q", *log)
	}
	if strings.Contains(all, long[:1000]) {
		t.Fatal("the log holds the whole label")
	}
}
