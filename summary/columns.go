package summary

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Columns are the summary's columns, declared once: the CSV, the text
// table (Table) and the TUI's table read this list. Its order is the CSV's;
// the first seven names are a contract and the rest only grow at the end,
// so a new column is one entry appended here (see ARCHITECTURE.md).
var Columns = []Column{
	{Name: "label", Origin: OriginRow, Value: text(label),
		Text: &TextCol{Header: "label", Place: 10},
		TUI:  &TUICol{Title: "LABEL", Place: 10, Priority: 10, Flex: true}},
	{Name: "time", Origin: OriginRow, Value: Value{
		CSV:  func(r Row, _ *Context) string { return TimeString(r.T) },
		Cell: func(r Row, c *Context) string { return Elapsed(time.Duration(r.T - c.Start)) }},
		TUI: &TUICol{Title: "TIME", Place: 30, Right: true, Priority: 4}},
	{Name: "device", Origin: OriginRow, Value: word(func(r Row, _ *Context) string { return strconv.Itoa(r.Dev) }),
		Text: &TextCol{Header: "GPU", Place: 20}},
	{Name: "allocated_mb", Origin: OriginTorch, Value: inMiB(allocated),
		Text: &TextCol{Header: "allocated MiB", Place: 40},
		TUI:  &TUICol{Title: "ALLOCATED MiB", Place: 50, Right: true, Priority: 9, SaysAbsent: true}},
	{Name: "reserved_mb", Origin: OriginTorch, Value: inMiB(reserved),
		Text: &TextCol{Header: "reserved MiB", Place: 50},
		TUI:  &TUICol{Title: "RESERVED MiB", Wide: "RESERVED (CACHED) MiB", Place: 60, Right: true, Priority: 8, SaysAbsent: true}},
	{Name: "peak_mb", Origin: OriginTorch, Value: inMiB(peak),
		Text: &TextCol{Header: "peak MiB", Place: 60},
		TUI:  &TUICol{Title: "PEAK MiB", Place: 70, Right: true, Priority: 7, SaysAbsent: true}},
	{Name: "nvml_used_mb", Origin: OriginDriver, Value: inMiB(nvmlUsed),
		Text: &TextCol{Header: "NVML used MiB", Place: 70},
		TUI:  &TUICol{Title: "NVML USED MiB", Place: 80, Right: true, Priority: 9, SaysAbsent: true}},
	{Name: "nvml_peak_mb", Origin: OriginDriver, Value: inMiB(nvmlPeak),
		TUI: &TUICol{Title: "NVML PEAK MiB", Wide: "NVML PEAK SINCE PREV MiB", Place: 90, Right: true, Priority: 5}},
	{Name: "delta_allocated_mb", Origin: OriginDerived, Value: changeInMiB(func(r Row) *int64 { return r.DAllocated }),
		TUI: &TUICol{Title: "Δ ALLOC", Wide: "Δ ALLOC MiB", Place: 100, Right: true, Priority: 6}},
	{Name: "delta_nvml_used_mb", Origin: OriginDerived, Value: changeInMiB(func(r Row) *int64 { return r.DNVML }),
		TUI: &TUICol{Title: "Δ NVML", Wide: "Δ NVML MiB", Place: 110, Right: true, Priority: 2}},
	{Name: "device_name", Origin: OriginRow, Value: text(func(r Row, _ *Context) string { return r.DevName })},
	// a remote host's process: its own pid in the CSV (its host in the
	// host column), the store's key in the tables
	{Name: "pid", Origin: OriginRow, Value: Value{
		CSV: func(r Row, _ *Context) string {
			if r.PID == 0 {
				return ""
			}
			_, p := store.SplitPID(r.PID)
			return strconv.Itoa(p)
		},
		Cell: func(r Row, _ *Context) string {
			if r.PID == 0 {
				return Dash
			}
			return fmt.Sprint(r.PID)
		}},
		Text: &TextCol{Header: "pid", Place: 30},
		TUI:  &TUICol{Title: "PID", Place: 40, Right: true, Priority: 8, Only: SeveralProcesses}},
	{Name: "source", Origin: OriginRow, Value: word(func(r Row, _ *Context) string { return r.Source })},
	{Name: "allocated_bytes", Origin: OriginTorch, Value: byteCount(allocated)},
	{Name: "reserved_bytes", Origin: OriginTorch, Value: byteCount(reserved)},
	{Name: "peak_bytes", Origin: OriginTorch, Value: byteCount(peak)},
	{Name: "nvml_used_bytes", Origin: OriginDriver, Value: byteCount(nvmlUsed)},
	{Name: "nvml_peak_bytes", Origin: OriginDriver, Value: byteCount(nvmlPeak)},
	{Name: "oom_requested_bytes", Origin: OriginTorch, Value: byteCount(func(r Row) *uint64 {
		if r.OOM == nil {
			return nil
		}
		return &r.OOM.Requested
	})},
	{Name: "oom_free_bytes", Origin: OriginTorch, Value: byteCount(func(r Row) *uint64 {
		if r.OOM == nil {
			return nil
		}
		return &r.OOM.Free
	})},
	{Name: "oom_limit_bytes", Origin: OriginTorch, Value: byteCount(func(r Row) *uint64 {
		if r.OOM == nil || r.OOM.Limit == 0 {
			return nil
		}
		return &r.OOM.Limit
	})},
	// the CSV names the verdict, the tables show its sign
	{Name: "verdict", Origin: OriginDerived, Value: Value{
		CSV: func(r Row, _ *Context) string {
			if r.Verdict == nil {
				return ""
			}
			return r.Verdict.Status.String()
		},
		Cell: func(r Row, _ *Context) string {
			if r.Verdict == nil {
				return ""
			}
			return r.Verdict.Status.Mark()
		}},
		Text: &TextCol{Header: "", Place: 80},
		TUI:  &TUICol{Title: "", Place: 20, Priority: 11, Only: EndRowShown}},
	{Name: "verdict_basis", Origin: OriginDerived, Value: word(func(r Row, _ *Context) string {
		if r.Verdict == nil {
			return ""
		}
		return r.Verdict.Basis
	})},
	{Name: "held_python_bytes", Origin: OriginTorch, Value: byteCount(heldFigure(func(h *wire.Held) uint64 { return h.Python }))},
	{Name: "held_torch_internal_bytes", Origin: OriginTorch, Value: byteCount(heldFigure(func(h *wire.Held) uint64 { return h.Internal }))},
	{Name: "held_unaccounted_bytes", Origin: OriginTorch, Value: byteCount(heldFigure(func(h *wire.Held) uint64 { return h.Unaccounted }))},
	{Name: "top_holder", Origin: OriginTorch, Value: text(func(r Row, _ *Context) string {
		if r.Verdict == nil {
			return ""
		}
		return r.Verdict.Top
	})},
	{Name: "verdict_text", Origin: OriginDerived, Value: text(func(r Row, _ *Context) string {
		if r.Verdict == nil {
			return ""
		}
		return r.Verdict.Text
	})},
	{Name: "host", Origin: OriginRow, Value: text(func(r Row, c *Context) string {
		if r.Dev >= 0 && r.Dev < len(c.Devs) {
			return c.Devs[r.Dev].Host
		}
		return ""
	})},
	{Name: "rank", Origin: OriginRow, Value: word(func(r Row, c *Context) string {
		if p, ok := c.place(r); ok && p.Rank >= 0 {
			return strconv.Itoa(p.Rank)
		}
		return ""
	})},
	{Name: "job", Origin: OriginRow, Value: text(func(r Row, c *Context) string {
		p, _ := c.place(r)
		return p.Job
	})},
	{Name: "dump", Origin: OriginTorch, Value: text(func(r Row, _ *Context) string {
		if r.Dump == nil {
			return ""
		}
		return r.Dump.Path
	})},
	// torch's cache at the row (RowLayout): empty without a layout
	{Name: "free_in_segments_bytes", Origin: OriginTorch, Value: byteCount(layoutFigure(func(l *wire.Layout) uint64 { return l.FreeInSegments }))},
	{Name: "largest_free_bytes", Origin: OriginTorch, Value: byteCount(layoutFigure(func(l *wire.Layout) uint64 { return l.LargestFree }))},
	{Name: "segments", Origin: OriginTorch, Value: count(layoutFigure(func(l *wire.Layout) uint64 { return uint64(l.Segments) }))},
	{Name: "graph_pools_bytes", Origin: OriginTorch, Value: byteCount(layoutFigure((*wire.Layout).GraphPoolsBytes))},
	// the ledger at the row (LedgerOf): empty without one, and
	// outside_torch where NVML gave no figure for the process
	{Name: wire.PartParams + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartParams))},
	{Name: wire.PartGrads + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartGrads))},
	{Name: wire.PartOptimizer + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartOptimizer))},
	{Name: wire.PartActivations + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartActivations))},
	{Name: wire.PartOtherTensors + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartOtherTensors))},
	{Name: wire.PartWorkspace + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartWorkspace))},
	{Name: wire.PartCachedFree + "_bytes", Origin: OriginTorch, Value: byteCount(ledgerPart(wire.PartCachedFree))},
	{Name: wire.PartOutsideTorch + "_bytes", Origin: OriginDerived, Value: byteCount(ledgerPart(wire.PartOutsideTorch))},
	{Name: wire.PartUnattributed + "_bytes", Origin: OriginDerived, Value: byteCount(ledgerPart(wire.PartUnattributed))},
	// the other frameworks' figures (JAX, CuPy), each in its own names
	{Name: "framework", Origin: OriginTorch, Value: text(func(r Row, _ *Context) string {
		return FrameworksText(r.Frameworks)
	}), Detail: "frameworks:"},
	// what the nvml_ columns measure: "device" (the GPU's own memory) or
	// "system" (a unified-memory GPU, whose NVML memory query answers not
	// supported: the system's memory from /proc/meminfo); empty without an
	// NVML figure
	{Name: "nvml_memory", Origin: OriginDriver, Value: word(nvmlMemory)},
}

// the values a column may show

func label(r Row, _ *Context) string { return r.Label }
func allocated(r Row) *uint64        { return r.Allocated }
func reserved(r Row) *uint64         { return r.Reserved }
func peak(r Row) *uint64             { return r.Peak }
func nvmlUsed(r Row) *uint64         { return r.NVMLUsed }
func nvmlPeak(r Row) *uint64         { return r.NVMLPeak }

func nvmlMemory(r Row, c *Context) string {
	switch {
	case r.NVMLUsed == nil:
		return ""
	case r.Dev >= 0 && r.Dev < len(c.Devs) && c.Devs[r.Dev].Memory == wire.MemorySystem:
		return "system"
	}
	return "device"
}

// layoutFigure is one figure of the row's layout (none without one).
func layoutFigure(f func(*wire.Layout) uint64) func(Row) *uint64 {
	return func(r Row) *uint64 {
		l := RowLayout(r.Row)
		if l == nil {
			return nil
		}
		v := f(l)
		return &v
	}
}

// heldFigure is one figure of an end row's attribution (none when the
// walk was skipped).
func heldFigure(f func(*wire.Held) uint64) func(Row) *uint64 {
	return func(r Row) *uint64 {
		if r.Verdict == nil || r.Verdict.Held == nil || r.Verdict.Held.Skipped != "" {
			return nil
		}
		v := f(r.Verdict.Held)
		return &v
	}
}
