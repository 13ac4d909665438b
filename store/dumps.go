package store

import (
	"fmt"

	"github.com/gputop/gputop/wire"
)

// cleanDump copies a dump's report with its text made safe to show.
func cleanDump(d *wire.Dump) *wire.Dump {
	if d == nil {
		return nil
	}
	c := *d
	c.Path, c.Error = CleanText(d.Path), CleanText(d.Error)
	c.Removed = make([]string, len(d.Removed))
	for i, r := range d.Removed {
		c.Removed[i] = CleanText(r)
	}
	if len(c.Removed) == 0 {
		c.Removed = nil
	}
	return &c
}

// DumpLine is the log line of a dump taken at label by process pid.
func DumpLine(pid int, label string, d *wire.Dump) string {
	if d.Path == "" {
		return fmt.Sprintf("pid %d: no memory dump at %q: %s", pid, label, d.Error)
	}
	line := fmt.Sprintf("pid %d: memory dump at %q: %s (%.1f MiB; %.0f ms, GIL held %.0f ms",
		pid, label, d.Path, float64(d.Bytes)/(1<<20), d.TookMS, d.GILMS)
	if p := d.Phases; p != nil {
		line += ": wait " + phaseMS(p.WaitMS)
		if p.ImportMS > 0 {
			// torch's first snapshot with stacks imports it: said apart, as torch's
			line += ", torch importing torch._inductor " + phaseMS(p.ImportMS)
		}
		line += fmt.Sprintf(", torch %s (CPU %s), pickle %s, write %s, fsync %s, place %s",
			phaseMS(p.TakeMS), phaseMS(p.TakeCPUMS), phaseMS(p.PickleMS),
			phaseMS(p.WriteMS), phaseMS(p.FsyncMS), phaseMS(p.PlaceMS))
	}
	line += ")"
	if n := len(d.Removed); n > 0 {
		line += fmt.Sprintf("; %d older removed to stay within the bounds: %s", n, listClipped(d.Removed, 3))
	}
	return line
}

// phaseMS is one phase of a dump's time: whole milliseconds from 10 on,
// else one decimal (a phase of a fast dump is a fraction of one).
func phaseMS(ms float64) string {
	if ms >= 10 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
