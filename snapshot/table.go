package snapshot

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Table is the summary table as text, one row a line after a header, for
// a terminal without the TUI (`gputop run --no-tui`): the figures the CSV
// starts with, in MiB, and an end row's verdict sign. A value no source
// gave is "—", never 0.
func Table(snaps []wire.Snapshot, devs []store.Device) []string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "label\tGPU\tpid\tallocated MiB\treserved MiB\tpeak MiB\tNVML used MiB\t\t")
	for _, r := range Rows(snaps, devs) {
		pid, mark := "—", ""
		if r.PID != 0 {
			pid = fmt.Sprint(r.PID)
		}
		if r.Verdict != nil {
			mark = r.Verdict.Status.Mark()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Label, r.Dev, pid,
			dash(r.Allocated), dash(r.Reserved), dash(r.Peak), dash(r.NVMLUsed), mark)
	}
	tw.Flush()
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func dash(b *uint64) string {
	if b == nil {
		return "—"
	}
	return MiB(*b)
}
