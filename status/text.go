// The status report as a short text table: `gputop status` without --json.

package status

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Text writes r as a few short tables: devices, processes, agents, rows
// and OOMs, each list's "why" where it is empty and what a bound left
// out. Text in it was made printable where it entered (Clean, the
// store); it is cleaned again here, the last step before a terminal.
func Text(w io.Writer, r wire.StatusReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	from := "one NVML reading (no gputop is running)"
	if r.Source == wire.StatusFromGputop {
		from = "the running gputop"
		if r.Socket != "" {
			from += " at " + clean(r.Socket)
		}
	}
	p("gputop status at %s, from %s\n", time.Unix(0, r.T).Format(time.DateTime), from)

	p("\nGPU\tNAME\tUSED\tFREE\tTOTAL\tFROM\n")
	for _, d := range r.Devices {
		name := clean(d.Name)
		if d.Host != "" {
			name = clean(d.Host) + ": " + name
		}
		p("%d\t%s\t%s\t%s\t%s\t%s\n", d.Index, name, bytesText(d.Used), bytesText(d.Free), bytesText(d.Total), clean(d.From))
		if d.Error != "" {
			p("\t  error: %s\n", clean(d.Error))
		}
	}
	why(p, r.DevicesWhy, 0)

	p("\nPROCESSES (NVML)\n")
	if len(r.Processes) > 0 {
		p("GPU\tPID\tNAME\tUSED\tAGENT\n")
	}
	for _, pr := range r.Processes {
		p("%d\t%s\t%s\t%s\t%s\n", pr.Dev, pidText(pr.PID, pr.Key), clean(pr.Name), bytesText(pr.Used), yes(pr.Agent))
	}
	why(p, r.ProcessesWhy, r.ProcessesLeftOut)

	p("\nAGENTS (torch's allocator)\n")
	if len(r.Agents) > 0 {
		p("PID\tNAME\tGPU\tALLOCATED\tRESERVED\tPEAK\tLIMIT\tSTATE\n")
	}
	for _, a := range r.Agents {
		state := "attached"
		if !a.Connected {
			state = "ended"
			if a.EndReason != "" {
				state += ": " + clean(a.EndReason)
			}
		}
		if len(a.Devices) == 0 {
			p("%s\t%s\t-\t-\t-\t-\t-\t%s\n", pidText(a.PID, a.Key), clean(a.Name), state)
		}
		for _, d := range a.Devices {
			p("%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", pidText(a.PID, a.Key), clean(a.Name), d.Dev,
				bytesText(d.Allocated), bytesText(d.Reserved), bytesText(d.Peak), bytesText(d.Limit), state)
		}
	}
	why(p, r.AgentsWhy, r.AgentsLeftOut)

	p("\nROWS (newest last)\n")
	if len(r.Rows) > 0 {
		p("TIME\tLABEL\tGPU\tPID\tALLOCATED\tNVML USED\tVERDICT\n")
	}
	for _, row := range r.Rows {
		verdict := ""
		if v := row.Verdict; v != nil {
			verdict = clean(v.Mark) + " " + clean(v.Status)
		}
		p("%s\t%s\t%d\t%s\t%s\t%s\t%s\n", clock(row.T), clean(row.Label), row.Dev, pidText(row.PID, row.Key),
			bytesText(row.Allocated), bytesText(row.NVMLUsed), verdict)
	}
	why(p, r.RowsWhy, r.RowsLeftOut)

	p("\nOOMS\n")
	for _, o := range r.OOMs {
		asked := ""
		if e := o.Explanation; e != nil {
			asked = clean(e.Asked)
		}
		p("%s\tGPU %d\tpid %s\t%s\n", clock(o.T), o.Dev, pidText(o.PID, o.Key), asked)
		if e := o.Explanation; e != nil {
			p("\t  %s\n", clean(strings.TrimSpace(e.Cause+" "+e.Fix)))
		}
	}
	why(p, r.OOMsWhy, r.OOMsLeftOut)
	return tw.Flush()
}

// why says why a list is empty, or how many entries its bound left out.
func why(p func(string, ...any), why string, left int) {
	if why != "" {
		p("  (%s)\n", clean(why))
	}
	if left > 0 {
		p("  (%d more not listed)\n", left)
	}
}

func clean(s string) string { return printable.Clean(s) }

func bytesText(b *uint64) string {
	if b == nil {
		return "-"
	}
	return units.Bytes(*b)
}

func pidText(pid int, key string) string {
	switch {
	case key != "":
		return clean(key)
	case pid == 0:
		return "-"
	}
	return strconv.Itoa(pid)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func clock(t int64) string { return time.Unix(0, t).Format(time.TimeOnly) }
