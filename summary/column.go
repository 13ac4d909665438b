// A summary column: what one is, where its value comes from and how it
// is written; the list itself is columns.go.

package summary

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Column is one column of the summary: a CSV column always, and a column
// of the text table, of the TUI's table or a figure in the TUI's details
// of the selected row where it says so.
type Column struct {
	Name   string // its CSV header (lower_snake, ending in its unit: _mb, _bytes)
	Origin Origin // where its figure comes from
	Value  Value  // how a row's value is written (inMiB, changeInMiB, byteCount, count, text, word)
	Text   *TextCol
	TUI    *TUICol
	// the words before its value in the TUI's details of the selected row
	// ("": not there); the value is its table cell
	Detail string
}

// Origin is where a column's figure comes from.
type Origin int

const (
	OriginRow     Origin = iota // the row itself: its label, time, GPU, process, place in a job
	OriginTorch                 // the agent inside the process: torch's counters, its OOM, its holders walk
	OriginDriver                // NVML, the driver's view of the GPU
	OriginDerived               // worked out by gputop from rows: deltas, verdicts
)

// Unit is what a column's figures count.
type Unit string

const (
	NoUnit    Unit = ""
	UnitMiB   Unit = "MiB"   // 2^20 bytes, two decimals (the CSV's *_mb)
	UnitBytes Unit = "bytes" // exact
)

// Dash is a table's cell for a value no source gave: never 0.
const Dash = "—"

// Value is how a column writes a row's value.
type Value struct {
	Unit Unit
	CSV  func(Row, *Context) string // the CSV cell: "" where no source gave a value
	Cell func(Row, *Context) string // a table's cell: Dash where no source gave a figure
}

// Context is what a cell may need besides its row.
type Context struct {
	Devs   []store.Device     // the devices by index (a row's host)
	Places map[int]wire.Place // each agent process's place in a job (nil: none known)
	Start  int64              // the run's start (the TUI's TIME)
}

func (c *Context) place(r Row) (wire.Place, bool) {
	if r.PID == 0 {
		return wire.Place{}, false
	}
	p, ok := c.Places[r.PID]
	return p, ok
}

// TextCol is a column's place in the text table (Table).
type TextCol struct {
	Header string
	Place  int // left to right by place (numbered in tens: room to put one between)
}

// TUICol is a column's place in the TUI's summary table and its width rules.
type TUICol struct {
	Title string
	Wide  string // the title from WideTitles cells on ("": Title)
	Place int    // left to right by place (numbered in tens)
	Right bool   // right aligned (figures)
	// a narrow terminal drops the lowest priority first; the Flex column
	// (the label) is shortened instead, never dropped
	Priority int
	Flex     bool
	// the title says so when no row shown has a figure of the column's
	// origin: " (no agent)" (OriginTorch), " (no NVML)" (OriginDriver)
	SaysAbsent bool
	Only       When
}

// WideTitles is the width from which the TUI's table uses Wide titles:
// the long names (the reference tracker's "cached", what the NVML peak
// covers, the deltas' unit).
const WideTitles = 140

// When a TUI column is shown.
type When int

const (
	Always           When = iota
	SeveralProcesses      // the rows shown are of more than one process (the PID)
	EndRowShown           // an end row is among the rows shown (the verdict's sign)
)

// TextColumns are the columns of the text table, left to right.
func TextColumns() []Column {
	return placed(func(c Column) (int, bool) {
		if c.Text == nil {
			return 0, false
		}
		return c.Text.Place, true
	})
}

// TUIColumns are the columns of the TUI's table, left to right.
func TUIColumns() []Column {
	return placed(func(c Column) (int, bool) {
		if c.TUI == nil {
			return 0, false
		}
		return c.TUI.Place, true
	})
}

func placed(at func(Column) (int, bool)) []Column {
	var out []Column
	for _, c := range Columns {
		if _, ok := at(c); ok {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Column) int {
		pa, _ := at(a)
		pb, _ := at(b)
		return pa - pb
	})
	return out
}

// Elapsed writes a time since the run's start as the TUI does: h:mm:ss.t.
func Elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	tenths := int64(d / (100 * time.Millisecond))
	s := tenths / 10
	return fmt.Sprintf("%d:%02d:%02d.%d", s/3600, s/60%60, s%60, tenths%10)
}

// how values are written

// inMiB is a byte figure in MiB with two decimals.
func inMiB(get func(Row) *uint64) Value {
	return Value{Unit: UnitMiB,
		CSV: func(r Row, _ *Context) string { return OptMiB(get(r)) },
		Cell: func(r Row, _ *Context) string {
			if b := get(r); b != nil {
				return MiB(*b)
			}
			return Dash
		}}
}

// changeInMiB is a change of a byte figure in signed MiB.
func changeInMiB(get func(Row) *int64) Value {
	return Value{Unit: UnitMiB,
		CSV: func(r Row, _ *Context) string {
			if d := get(r); d != nil {
				return SignedMiB(*d)
			}
			return ""
		},
		Cell: func(r Row, _ *Context) string {
			if d := get(r); d != nil {
				return SignedMiB(*d)
			}
			return Dash
		}}
}

// byteCount is a byte figure, exact in the CSV, short in a table.
func byteCount(get func(Row) *uint64) Value {
	return Value{Unit: UnitBytes,
		CSV: func(r Row, _ *Context) string {
			if b := get(r); b != nil {
				return strconv.FormatUint(*b, 10)
			}
			return ""
		},
		Cell: func(r Row, _ *Context) string {
			if b := get(r); b != nil {
				return units.Bytes(*b)
			}
			return Dash
		}}
}

// count is a number of things, the same in the CSV and a table.
func count(get func(Row) *uint64) Value {
	return Value{
		CSV: func(r Row, _ *Context) string {
			if n := get(r); n != nil {
				return strconv.FormatUint(*n, 10)
			}
			return ""
		},
		Cell: func(r Row, _ *Context) string {
			if n := get(r); n != nil {
				return strconv.FormatUint(*n, 10)
			}
			return Dash
		}}
}

// text is free text from outside (a label, a name, a path): the CSV keeps
// a spreadsheet from reading it as a formula (textCell).
func text(get func(Row, *Context) string) Value {
	return Value{
		CSV:  func(r Row, c *Context) string { return textCell(get(r, c)) },
		Cell: get}
}

// word is a number or a word gputop writes itself: as it is everywhere.
func word(get func(Row, *Context) string) Value {
	return Value{CSV: get, Cell: get}
}
