package summary

import (
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Table is the summary table as text, one row a line after a header, for
// a terminal without the TUI (`gputop run --no-tui`): the Columns with a
// TextCol (the figures the CSV starts with, in MiB, and an end row's
// verdict sign). A value no source gave is Dash, never 0.
func Table(snaps []wire.Row, devs []store.Device) []string {
	cols := TextColumns()
	c := &Context{Devs: devs}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	// every cell ends in a tab: the last column is padded like the others
	for _, col := range cols {
		io.WriteString(tw, col.Text.Header+"\t")
	}
	io.WriteString(tw, "\n")
	for _, r := range Rows(snaps, devs) {
		for _, col := range cols {
			io.WriteString(tw, col.Value.Cell(r, c)+"\t")
		}
		io.WriteString(tw, "\n")
	}
	tw.Flush()
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
