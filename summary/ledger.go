// The ledger at a row: what the process's memory on the device was made
// of, part by part, adding up to NVML's figure for the process.

package summary

import (
	"fmt"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Part is one part of a row's ledger.
type Part struct {
	Name  string // wire.PartParams, ...: Prometheus's part label; the CSV's column is Name + "_bytes"
	Title string // as the tables and the text name it
	Short string // one letter: the stacked bar's and a narrow screen's name of it
	Bytes uint64
	Known bool   // false: gputop cannot tell (Bytes is 0, Why says why)
	Basis string // what the figure is based on
	Why   string // not Known: why
}

// Ledger is a row's ledger as the summary shows it: the agent's walk
// (wire.Ledger) with what gputop adds from the driver, as parts that add
// up to NVML's figure for the process, or, where NVML's figure is
// unknown, to torch's reserved bytes.
type Ledger struct {
	wire.Ledger
	Parts []Part // in wire's order: params … workspace, unattributed, cached free, outside torch
	// NVML's figure for the process at the walk: what Parts add up to;
	// nil when unknown (outside torch is then unknown too)
	NVML   *uint64
	NVMLAt int64 // the time of the process list NVML's figure is from
	// the allocator's layout at the row: cached free's split (nil: none)
	Layout *wire.Layout
}

// partTitles name the parts in wire's order (wire.Part* constants).
var partTitles = []struct{ name, title, short, basis string }{
	{wire.PartParams, "params", "P", "the agent's walk: parameters and buffers of live modules"},
	{wire.PartGrads, "grads", "G", "the agent's walk: the parameters' .grad"},
	{wire.PartOptimizer, "optimizer state", "O", "the agent's walk: every optimizer's state"},
	{wire.PartActivations, "activations", "A", "the agent's walk: tensors saved for backward by live autograd graphs"},
	{wire.PartOtherTensors, "other tensors", "T", "the agent's walk: every other live CUDA tensor"},
	{wire.PartWorkspace, "workspaces", "W", "the agent's walk: torch's cuBLAS/cuBLASLt workspaces"},
	{wire.PartUnattributed, "unattributed", "U", "derived: torch's allocated − the parts above"},
	{wire.PartCachedFree, "cached free", "C", "torch's counters: reserved − allocated"},
	{wire.PartOutsideTorch, "outside torch", "X", "derived: NVML's figure for the process − torch's reserved"},
}

// PartNames are the ledger's parts in order, as Prometheus's part label
// and the CSV's columns (with "_bytes") name them.
func PartNames() []string {
	out := make([]string, len(partTitles))
	for i, p := range partTitles {
		out[i] = p.name
	}
	return out
}

// LedgerOf is row r's ledger, when it has one with figures (a ledger
// that says why it has none is not: see LedgerNote).
func LedgerOf(r Row) (Ledger, bool) {
	if r.Row.Ledger == nil || r.Row.Ledger.Skipped != "" {
		return Ledger{}, false
	}
	l := Ledger{Ledger: *r.Row.Ledger, NVML: r.NVMLProcess, NVMLAt: r.NVMLProcessAt, Layout: RowLayout(r.Row)}
	figures := []uint64{l.Params, l.Grads, l.Optimizer, l.Activations, l.OtherTensors, l.Workspace,
		l.Unattributed(), l.CachedFree(), 0}
	outside, why := uint64(0), ""
	known := false
	switch {
	case l.NVML == nil:
		why = "NVML gave no figure for the process at the walk"
	default:
		outside, known = l.OutsideTorch(*l.NVML)
		if !known {
			why = fmt.Sprintf("NVML's figure for the process (%s) is below torch's reserved (%s): it lags the allocator by up to a sample",
				units.Bytes(*l.NVML), units.Bytes(l.Reserved))
		}
	}
	figures[8] = outside
	for i, p := range partTitles {
		part := Part{Name: p.name, Title: p.title, Short: p.short, Bytes: figures[i], Known: true, Basis: p.basis}
		if p.name == wire.PartOutsideTorch && !known {
			part.Known, part.Why = false, why
		}
		l.Parts = append(l.Parts, part)
	}
	return l, true
}

// Part returns the part named name.
func (l Ledger) Part(name string) Part {
	for _, p := range l.Parts {
		if p.Name == name {
			return p
		}
	}
	return Part{Name: name}
}

// Total is what the parts add up to: NVML's figure for the process when
// known (outside torch known too), else torch's reserved bytes; whole
// says which.
func (l Ledger) Total() (total uint64, whole bool) {
	if p := l.Part(wire.PartOutsideTorch); p.Known && l.NVML != nil {
		return *l.NVML, true
	}
	return l.Reserved, false
}

// LedgerNote says why a row has no ledger figures, or that it waits for
// them ("": it has them, or nothing asked for them: a row without an
// agent, a mark sent without one).
func LedgerNote(r Row) string {
	switch {
	case r.Row.Ledger != nil && r.Row.Ledger.Skipped != "":
		return "no ledger: " + r.Row.Ledger.Skipped
	case r.Row.Ledger == nil && r.Awaiting && !r.End:
		return "waiting for its agent's walk for the ledger"
	}
	return ""
}

// ledgerPart is one part's figure of a row's ledger (none without a
// ledger, or where gputop cannot tell).
func ledgerPart(name string) func(Row) *uint64 {
	return func(r Row) *uint64 {
		l, ok := LedgerOf(r)
		if !ok {
			return nil
		}
		p := l.Part(name)
		if !p.Known {
			return nil
		}
		return &p.Bytes
	}
}
