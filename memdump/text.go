package memdump

import (
	"fmt"
	"io"
	"strings"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/units"
)

// WriteText writes the summary as text, at most top frames per device (0:
// all). File names, function names and labels come from the dump, so each
// is made printable.
func WriteText(w io.Writer, d *Dump, top int) error {
	var b strings.Builder
	name := d.Path
	if name == "" {
		name = "dump"
	}
	fmt.Fprintf(&b, "%s: torch memory dump", printable.Clean(name))
	if d.Bytes >= 0 {
		fmt.Fprintf(&b, " of %s", units.Bytes(uint64(d.Bytes)))
	}
	if d.History {
		b.WriteString(", allocation history recorded\n")
	} else {
		b.WriteString(", no allocation history (blocks have no stacks: torch.cuda.memory._record_memory_history was off)\n")
	}
	if d.Cut > 0 {
		fmt.Fprintf(&b, "%d file name%s, function name%[2]s or label%[2]s longer than %s: cut to it\n",
			d.Cut, plural(d.Cut), units.Bytes(maxText))
	}
	if len(d.Devices) == 0 {
		b.WriteString("no device has memory in it\n")
	}
	for _, dv := range d.Devices {
		fmt.Fprintf(&b, "cuda:%d: reserved %s in %d segment%s, allocated %s in %d block%s\n",
			dv.Index, units.Bytes(dv.Reserved), dv.Segments, plural(dv.Segments),
			units.Bytes(dv.Allocated), dv.Blocks, plural(dv.Blocks))
		fmt.Fprintf(&b, "  free in the segments: %s in %d block%s (%s of reserved), the largest %s\n",
			units.Bytes(dv.Free), dv.FreeBlocks, plural(dv.FreeBlocks), percent(dv.Free, dv.Reserved),
			units.Bytes(dv.LargestFree))
		if o := dv.OOM; o != nil {
			fmt.Fprintf(&b, "  out of memory: %s asked for at %s", units.Bytes(o.Requested), clean(o.Frame.String()))
			if o.Label != "" {
				fmt.Fprintf(&b, " (under %q)", clean(o.Label))
			}
			fmt.Fprintf(&b, "; CUDA reported %s free; the largest free block in the cache: %s\n",
				units.Bytes(o.DeviceFree), units.Bytes(o.LargestFree))
		}
		if dv.Trace > 0 {
			fmt.Fprintf(&b, "  history: %d trace entr%s\n", dv.Trace, map[bool]string{true: "y", false: "ies"}[dv.Trace == 1])
		}
		if len(dv.Live) == 0 {
			continue
		}
		b.WriteString("  live blocks by allocating frame, largest first:\n")
		fmt.Fprintf(&b, "  %12s %7s  %s\n", "bytes", "blocks", "frame")
		shown := dv.Live
		if top > 0 && len(shown) > top {
			shown = shown[:top]
		}
		for _, g := range shown {
			fmt.Fprintf(&b, "  %12s %7d  %s", units.Bytes(g.Bytes), g.Blocks, clean(g.Frame.String()))
			if len(g.Labels) > 0 {
				fmt.Fprintf(&b, "  [%s]", labels(g.Labels, maxLabels))
			}
			b.WriteByte('\n')
		}
		if rest := dv.Live[len(shown):]; len(rest) > 0 {
			var bytes uint64
			var blocks int
			for _, g := range rest {
				bytes += g.Bytes
				blocks += g.Blocks
			}
			fmt.Fprintf(&b, "  %12s %7d  (%d more frames)\n", units.Bytes(bytes), blocks, len(rest))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func clean(s string) string { return printable.Clean(s) }

// maxLabels: labels shown per frame; a loop labelled at every step would
// make a line of each.
const maxLabels = 3

// labels lists the first n labels the frame's live blocks were allocated
// under (in the order the blocks lie in memory) and how many more there are.
func labels(ls []string, n int) string {
	out := make([]string, 0, n+1)
	for _, l := range ls[:min(n, len(ls))] {
		out = append(out, clean(l))
	}
	if len(ls) > n {
		out = append(out, fmt.Sprintf("and %d more", len(ls)-n))
	}
	return strings.Join(out, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func percent(a, b uint64) string {
	if b == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}
