package summary

import (
	"encoding/csv"
	"io"
	"strings"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Header is the summary CSV header: the names of Columns, in order. The
// first seven are a contract; the exact byte columns let a reader check
// values to the byte.
func Header() []string {
	h := make([]string, len(Columns))
	for i, c := range Columns {
		h[i] = c.Name
	}
	return h
}

// Records returns the CSV records (header first) for the summary rows.
// Values that have no source are empty cells, never 0.
func Records(snaps []wire.Row, devs []store.Device) [][]string {
	return RecordsWithPlaces(snaps, devs, nil)
}

// RecordsWithPlaces is Records with each row's rank and job from places,
// by the row's pid (nil: those columns stay empty).
func RecordsWithPlaces(snaps []wire.Row, devs []store.Device, places map[int]wire.Place) [][]string {
	return records(Rows(snaps, devs), devs, places)
}

// StoreRecords are the CSV records of everything st holds: its rows with
// what its series add to them (RowsOf: the ledger's outside torch), each
// with its rank and job.
func StoreRecords(st *store.Store) [][]string {
	devs := st.Devices()
	return records(RowsOf(st, st.Rows(), devs), devs, st.Places())
}

func records(rows []Row, devs []store.Device, places map[int]wire.Place) [][]string {
	recs := [][]string{Header()}
	c := &Context{Devs: devs, Places: places}
	for _, r := range rows {
		rec := make([]string, len(Columns))
		for i, col := range Columns {
			rec[i] = col.Value.CSV(r, c)
		}
		recs = append(recs, rec)
	}
	return recs
}

// textCell keeps a spreadsheet from reading free text as a formula: text
// that starts with =, +, -, @, a tab or a carriage return gets a leading
// apostrophe, which spreadsheets hide and treat as "this is text".
// Numbers are never changed.
func textCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteCSV writes the summary CSV to path the way the user means it (see
// package outfile): a file is replaced atomically, so a reader never sees
// half a file and a failed write leaves any earlier export intact; "-" is
// standard output; a device or FIFO is written in place; a read-only file
// or a directory is refused with an error naming path.
func WriteCSV(path string, snaps []wire.Row, devs []store.Device) error {
	return writeRecords(path, Records(snaps, devs))
}

// WriteStoreCSV writes the summary CSV of everything st holds, as WriteCSV
// does, with each row's rank and job and what the store's series add to
// the rows (StoreRecords).
func WriteStoreCSV(path string, st *store.Store) error {
	return writeRecords(path, StoreRecords(st))
}

func writeRecords(path string, recs [][]string) error {
	return outfile.Write(path, func(w io.Writer) error {
		return csv.NewWriter(w).WriteAll(recs)
	})
}
