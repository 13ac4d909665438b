package memdump

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

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
		writeStructure(&b, dv.Structure)
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
		if len(dv.Live) > 0 {
			b.WriteString("  live blocks by allocating frame, largest first:\n")
			writeGroups(&b, dv.Live, top)
		}
		writeTracePeak(&b, dv.TracePeak, top)
	}
	writeSettings(&b, d.Settings)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGroups is a table of groups, at most top (0: all), the rest summed.
func writeGroups(b *strings.Builder, groups []Group, top int) {
	fmt.Fprintf(b, "  %12s %7s  %s\n", "bytes", "blocks", "frame")
	shown := groups
	if top > 0 && len(shown) > top {
		shown = shown[:top]
	}
	for _, g := range shown {
		fmt.Fprintf(b, "  %12s %7d  %s", units.Bytes(g.Bytes), g.Blocks, clean(g.Frame.String()))
		if len(g.Labels) > 0 {
			fmt.Fprintf(b, "  [%s]", labels(g.Labels, maxLabels))
		}
		b.WriteByte('\n')
	}
	if rest := groups[len(shown):]; len(rest) > 0 {
		var bytes uint64
		var blocks int
		for _, g := range rest {
			bytes += g.Bytes
			blocks += g.Blocks
		}
		fmt.Fprintf(b, "  %12s %7d  (%d more frames)\n", units.Bytes(bytes), blocks, len(rest))
	}
}

// writeTracePeak says where the history's trace was highest and what was
// live there, by allocating frame.
func writeTracePeak(b *strings.Builder, tp *TracePeak, top int) {
	if tp == nil {
		return
	}
	if tp.Now {
		fmt.Fprintf(b, "  the trace's highest point: the dump's own moment, %s allocated (the blocks above)\n", units.Bytes(tp.Allocated))
		return
	}
	when := "at the trace's first entry or before it (the trace holds only the last max_entries events)"
	if !tp.AtStart {
		when = fmt.Sprintf("%.3f s before the trace's last entry", float64(max(tp.LastUS-tp.TimeUS, 0))/1e6)
		if tp.Label != "" {
			when += fmt.Sprintf(" (under %q)", clean(tp.Label))
		}
	}
	fmt.Fprintf(b, "  the trace's highest point: %s allocated, %s; live blocks then by allocating frame, largest first:\n",
		units.Bytes(tp.Allocated), when)
	writeGroups(b, tp.Live, top)
	if tp.Unknown > 0 {
		fmt.Fprintf(b, "  %12s          (allocated before the trace's first entry and freed since: no frame known)\n", units.Bytes(tp.Unknown))
	}
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

// textWidth is the most columns a line of the structure or the settings
// takes: the settings' lines hold to it whatever the dump says, the
// structure's while a device's sizes are below 10,000 GiB and its counts
// below 10^6 (a real device's are far below).
const textWidth = 100

// maxPoolLines: pools listed per device; the rest are summed in a line.
const maxPoolLines = 8

// The pool table's id and type columns: longer ones (a hostile dump's)
// are cut.
const (
	maxPoolID   = 24
	maxPoolType = 8
)

// writeStructure writes a device's structure: the same figures, in the
// same words, as gputop's live view of the allocator.
func writeStructure(b *strings.Builder, s Structure) {
	// one pool of one type, the default: its line would repeat the totals
	onlyDefault := len(s.Pools) == 1 && s.Pools[0].Kind() == "default"
	fmt.Fprintf(b, "  torch's cache: %d segment%s (%d expandable), %d block%s%s\n",
		s.Segments, plural(s.Segments), s.Expandable, s.Blocks, plural(s.Blocks),
		map[bool]string{true: ", all in the default pool"}[onlyDefault])
	fmt.Fprintf(b, "    %s reserved, %s allocated, %s free in segments\n",
		units.Bytes(s.Reserved), units.Bytes(s.Allocated), units.Bytes(s.Free()))
	fmt.Fprintf(b, "    largest free block %s (fragmentation %.1f%% = 1 − largest free ÷ free in segments)\n",
		units.Bytes(s.LargestFree), 100*s.Fragmentation())
	if s.PendingFree > 0 {
		fmt.Fprintf(b, "    %s of it in blocks freed but still used by another stream (active_pending_free)\n",
			units.Bytes(s.PendingFree))
	}
	if s.Saturated {
		b.WriteString("    sizes summed past 2^64 bytes, held there: no device's (a damaged or made-up dump?)\n")
	}
	if len(s.Pools) == 0 || onlyDefault {
		return
	}
	idW, typeW := len("id"), len("type")
	shown := s.Pools[:min(len(s.Pools), maxPoolLines)]
	for _, p := range shown {
		idW = max(idW, utf8.RuneCountInString(clip(p.IDText(), maxPoolID)))
		typeW = max(typeW, utf8.RuneCountInString(clip(clean(p.Type), maxPoolType)))
	}
	fmt.Fprintf(b, "    %-7s  %-*s  %-*s  %8s  %10s  %10s  %12s\n",
		"pool", idW, "id", typeW, "type", "segments", "reserved", "allocated", "largest free")
	private, unknown := false, false
	for _, p := range shown {
		typ := clean(p.Type)
		if typ == "" {
			typ = "-"
		}
		fmt.Fprintf(b, "    %-7s  %-*s  %-*s  %8d  %10s  %10s  %12s\n",
			p.Kind(), idW, clip(p.IDText(), maxPoolID), typeW, clip(typ, maxPoolType), p.Segments,
			units.Bytes(p.Reserved), units.Bytes(p.Allocated), units.Bytes(p.LargestFree))
		private = private || p.Kind() == "private"
		unknown = unknown || p.Kind() == "unknown"
	}
	if rest := s.Pools[len(shown):]; len(rest) > 0 {
		var segs int
		var reserved, allocated uint64
		for _, p := range rest {
			segs += p.Segments
			reserved, allocated = sat(reserved, p.Reserved, nil), sat(allocated, p.Allocated, nil)
			private = private || p.Kind() == "private"
		}
		fmt.Fprintf(b, "    (%d more pools: %d segment%s, %s reserved, %s allocated)\n",
			len(rest), segs, plural(segs), units.Bytes(reserved), units.Bytes(allocated))
	}
	if private {
		b.WriteString("    private: a CUDA graph's pool or a torch.cuda.MemPool (a dump does not say which)\n")
	}
	if unknown {
		b.WriteString("    unknown: the dump gives no segment_pool_id (an older torch, or another tool)\n")
	}
}

// clip is s cut to n bytes with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cut(s, n)
}

// writeSettings writes the allocator's settings, packed into lines of
// at most textWidth columns; a setting longer than a line goes on in
// lines of its own. Widths are counted in bytes: text made printable is
// never wider than its bytes.
func writeSettings(b *strings.Builder, s *Settings) {
	if s == nil {
		b.WriteString("allocator settings: not in this dump\n")
		return
	}
	line := "allocator settings:"
	if len(s.Entries) == 0 {
		line += " none given"
	}
	cuts := 0
	for i, e := range s.Entries {
		if e.Cut {
			cuts++
		}
		item := clean(e.Key) + "=" + clean(e.Value)
		sep := "  "
		if i == 0 {
			sep = " "
		}
		if len(line)+len(sep)+len(item) > textWidth {
			b.WriteString(line + "\n")
			line, sep = " ", " "
		}
		for len(line)+len(sep)+len(item) > textWidth {
			n := textWidth - len(line) - len(sep)
			if sp := strings.LastIndexByte(item[:n], ' '); sp > 0 {
				n = sp + 1 // after a space, where one is
			}
			for n > 0 && !utf8.RuneStart(item[n]) {
				n--
			}
			b.WriteString(line + sep + strings.TrimRight(item[:n], " ") + "\n")
			line, sep, item = "   ", " ", item[n:]
		}
		line += sep + item
	}
	b.WriteString(line + "\n")
	if s.More > 0 || cuts > 0 {
		var what []string
		if s.More > 0 {
			what = append(what, fmt.Sprintf("%d more not shown", s.More))
		}
		if cuts > 0 {
			what = append(what, fmt.Sprintf("%d cut (…): keys to %d bytes, values to %d", cuts, maxSettingKey, maxSettingValue))
		}
		fmt.Fprintf(b, "  (%s)\n", strings.Join(what, "; "))
	}
}
