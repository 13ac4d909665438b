package recording

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// editedRecording writes a recording of n rows, each then renamed
// (or deleted) by the user, oldest first, as a TUI's --record writes it.
func editedRecording(b *testing.B, n int, del bool) []byte {
	path := tempPath(b, "edits.gputop")
	w, err := Create(path, header())
	if err != nil {
		b.Fatal(err)
	}
	in := ingest.New(store.New(liveOptions()))
	in.SetTap(w)
	in.Device(store.Device{Index: 0, UUID: "GPU-a", Name: "g", Total: 1 << 30, Source: "nvml"})
	rows := make([]wire.Row, 0, n)
	for i := range n {
		rows = append(rows, in.TakeSnapshot(fmt.Sprintf("row %d", i), 0, base+int64(i)*ms, "key", nil)...)
		if i%1000 == 999 {
			w.Flush() // a recorder keeps up with a user's rows
		}
	}
	for i, r := range rows {
		e := wire.RowEdit{T: r.T, Dev: r.Dev, PID: r.PID, Label: r.Label, Delete: del}
		if !del {
			e.Rename = fmt.Sprintf("renamed %d", i)
		}
		if len(in.Apply(0, e)) != 1 {
			b.Fatalf("edit %d found no row", i)
		}
		if i%1000 == 999 {
			w.Flush()
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if d := w.Stats().Drops(); d.Any() {
		b.Fatalf("the writer dropped %s", d)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// Loading (as export and replay do) a recording of 50,000 rows that the
// user renamed or deleted one by one.
func BenchmarkLoadRowEdits(b *testing.B) {
	for _, c := range []struct {
		name string
		del  bool
	}{{"renames", false}, {"deletes", true}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 50_000
			data := editedRecording(b, n, c.del)
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for range b.N {
				st := store.New(store.DefaultOptions())
				if _, err := LoadReader("bench", bytes.NewReader(data), st); err != nil {
					b.Fatal(err)
				}
				if want := map[bool]int{false: n, true: 0}[c.del]; len(st.Rows()) != want {
					b.Fatalf("%d rows loaded, want %d", len(st.Rows()), want)
				}
			}
		})
	}
}
