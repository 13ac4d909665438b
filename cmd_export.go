// gputop export FILE --csv OUT: a recording's summary CSV and findings.

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

// loadWarnings are a load's warnings, with how many more there were.
func loadWarnings(info recording.Info) []string {
	ws := info.Warnings
	if n := info.Warned - len(ws); n > 0 {
		ws = append(ws[:len(ws):len(ws)], fmt.Sprintf("%d more warnings like these", n))
	}
	return ws
}

// droppedNote says what a recording lacks: what its recorder dropped when it
// fell behind, and frames too long for a recording line.
func droppedNote(d recording.Drops) string {
	var notes []string
	if b := d.Behind(); b.Any() {
		notes = append(notes, fmt.Sprintf("the recorder dropped %s (its output did not keep up): the data has gaps there", b))
	}
	if d.TooLong > 0 {
		notes = append(notes, "the recorder dropped "+recording.TooLongText(d.TooLong))
	}
	return strings.Join(notes, "; ")
}

func cmdExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop export", stderr, "")
	out := fs.String("csv", "", "write the summary CSV to `OUT` (- is standard output; required)")
	// accept the file before or after the flags
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop export: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if file == "" || *out == "" {
		fmt.Fprintln(stderr, "gputop export: want FILE and --csv OUT")
		fs.Usage()
		return 2
	}
	// with the CSV on standard output, the report goes to stderr
	report := stdout
	if t, err := outfile.Resolve(*out); err == nil && t.Kind == outfile.Descriptor && t.FD == 1 {
		report = stderr
	}
	st := store.New(store.DefaultOptions())
	info, err := recording.Load(file, st)
	code := 0
	if err != nil {
		var fe *recording.FormatError
		switch {
		case !errors.As(err, &fe) || info.Frames == 0:
			// nothing to export: no CSV is written, none replaced
			say(stderr, "gputop export:", err)
			return 1
		case fe.Truncated:
			// a recorder that was killed: everything before its cut-off
			// last line is there, so this alone is not a failure
			say(stderr, "gputop export: warning:", err)
		default:
			// what was readable is still exported, but not all of it was
			say(stderr, "gputop export:", err)
			code = 1
		}
	}
	for _, w := range loadWarnings(info) {
		say(stderr, "gputop export: warning:", w)
	}
	if b := st.Bounds(); b.RowsDropped > 0 {
		say(stderr, fmt.Sprintf("gputop export: warning: %s has more rows than gputop keeps (%d): %d of the oldest are not in the CSV (each process's first row on a GPU and its end rows are kept while others can go)",
			file, b.MaxRows, b.RowsDropped))
	}
	if err := summary.WriteStoreCSV(*out, st); err != nil {
		say(stderr, "gputop export:", err)
		return 1
	}
	rows := fmt.Sprintf("%d rows", len(st.Rows()))
	if len(st.Rows()) == 1 {
		rows = "1 row"
	}
	say(report, fmt.Sprintf("wrote %s (%s)", *out, rows))
	if info.Dropped.Any() {
		say(report, fmt.Sprintf("%s: %s", file, droppedNote(info.Dropped)))
	}
	for _, l := range summary.Findings(st.Rows(), st.Devices()) {
		say(report, l)
	}
	for _, l := range summary.LedgerFindings(st) {
		say(report, l)
	}
	for _, l := range forecast.Findings(st) {
		say(report, l)
	}
	return code
}
