package snapshot

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Header is the summary CSV header. The first seven names are a contract;
// the exact byte columns let a reader check values to the byte.
var Header = []string{
	"label", "time", "device", "allocated_mb", "reserved_mb", "peak_mb", "nvml_used_mb",
	"nvml_peak_mb", "delta_allocated_mb", "delta_nvml_used_mb",
	"device_name", "pid", "source",
	"allocated_bytes", "reserved_bytes", "peak_bytes", "nvml_used_bytes", "nvml_peak_bytes",
	"oom_requested_bytes", "oom_free_bytes", "oom_limit_bytes",
	"verdict", "verdict_basis", "held_python_bytes", "held_torch_internal_bytes", "held_unaccounted_bytes",
	"top_holder", "verdict_text", "host", "rank", "job", "dump",
}

// Records returns the CSV records (header first) for the summary rows.
// Values that have no source are empty cells, never 0.
func Records(snaps []wire.Snapshot, devs []store.Device) [][]string {
	return RecordsWithPlaces(snaps, devs, nil)
}

// RecordsWithPlaces is Records with each row's rank and job from places,
// by the row's pid (nil: those columns stay empty).
func RecordsWithPlaces(snaps []wire.Snapshot, devs []store.Device, places map[int]wire.Place) [][]string {
	recs := [][]string{Header}
	for _, r := range Rows(snaps, devs) {
		// a remote host's process: its own pid, its host in the host column
		pid, host := "", ""
		if r.PID != 0 {
			_, p := store.SplitPID(r.PID)
			pid = strconv.Itoa(p)
		}
		if r.Dev >= 0 && r.Dev < len(devs) {
			host = devs[r.Dev].Host
		}
		req, free, limit := "", "", ""
		if o := r.OOM; o != nil {
			req, free = strconv.FormatUint(o.Requested, 10), strconv.FormatUint(o.Free, 10)
			if o.Limit > 0 {
				limit = strconv.FormatUint(o.Limit, 10)
			}
		}
		var verdict, basis, py, internal, unacc, top, text string
		if v := r.Verdict; v != nil {
			verdict, basis, top, text = v.Status.String(), v.Basis, v.Top, v.Text
			if h := v.Held; h != nil && h.Skipped == "" {
				py, internal, unacc = strconv.FormatUint(h.Python, 10), strconv.FormatUint(h.Internal, 10),
					strconv.FormatUint(h.Unaccounted, 10)
			}
		}
		dump := ""
		if r.Dump != nil {
			dump = r.Dump.Path
		}
		rank, job := "", ""
		if p, ok := places[r.PID]; ok && r.PID != 0 {
			if p.Rank >= 0 {
				rank = strconv.Itoa(p.Rank)
			}
			job = textCell(p.Job)
		}
		recs = append(recs, []string{
			textCell(r.Label), TimeString(r.T), strconv.Itoa(r.Dev),
			OptMiB(r.Allocated), OptMiB(r.Reserved), OptMiB(r.Peak), OptMiB(r.NVMLUsed),
			OptMiB(r.NVMLPeak), optDelta(r.DAllocated), optDelta(r.DNVML),
			textCell(r.DevName), pid, r.Source,
			optBytes(r.Allocated), optBytes(r.Reserved), optBytes(r.Peak), optBytes(r.NVMLUsed), optBytes(r.NVMLPeak),
			req, free, limit,
			verdict, basis, py, internal, unacc, textCell(top), textCell(text), textCell(host),
			rank, job, textCell(dump),
		})
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

func optDelta(d *int64) string {
	if d == nil {
		return ""
	}
	return SignedMiB(*d)
}

func optBytes(b *uint64) string {
	if b == nil {
		return ""
	}
	return strconv.FormatUint(*b, 10)
}

// WriteCSV writes the summary CSV to path the way the user means it (see
// package outfile): a file is replaced atomically, so a reader never sees
// half a file and a failed write leaves any earlier export intact; "-" is
// standard output; a device or FIFO is written in place; a read-only file
// or a directory is refused with an error naming path.
func WriteCSV(path string, snaps []wire.Snapshot, devs []store.Device) error {
	return writeRecords(path, Records(snaps, devs))
}

// WriteStoreCSV writes the summary CSV of everything st holds, as WriteCSV
// does, with each row's rank and job.
func WriteStoreCSV(path string, st *store.Store) error {
	return writeRecords(path, RecordsWithPlaces(st.Snapshots(), st.Devices(), st.Places()))
}

func writeRecords(path string, recs [][]string) error {
	return outfile.Write(path, func(w io.Writer) error {
		return csv.NewWriter(w).WriteAll(recs)
	})
}
