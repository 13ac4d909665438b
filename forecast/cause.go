// What grows: the ledger part whose growth explains the baseline's, and
// the holder the holders walks name for it.

package forecast

import (
	"github.com/gputop/gputop/wire"
)

// Cause says what grows. Part is the ledger part (a wire.Part* name) that
// grows most across the points' ledgers, by Growth bytes a unit; ""
// when the points carry fewer than two ledgers (Ledgers says how many).
// Holder is the holders walks' group for it: the one that grew most
// between the oldest and newest walk (HolderGrowth bytes), or with a
// single walk the largest one of the part's kind (Largest).
type Cause struct {
	Part         string
	Growth       float64
	Ledgers      int
	Holder       string
	HolderGrowth uint64
	Largest      bool
}

// partOrder is the ledger's parts as a forecast compares them, in the
// ledger's order, unattributed last.
var partOrder = []string{wire.PartParams, wire.PartGrads, wire.PartOptimizer, wire.PartActivations,
	wire.PartOtherTensors, wire.PartWorkspace, wire.PartUnattributed}

// partOf reads one part of a ledger.
func partOf(l *wire.Ledger, part string) uint64 {
	switch part {
	case wire.PartParams:
		return l.Params
	case wire.PartGrads:
		return l.Grads
	case wire.PartOptimizer:
		return l.Optimizer
	case wire.PartActivations:
		return l.Activations
	case wire.PartOtherTensors:
		return l.OtherTensors
	case wire.PartWorkspace:
		return l.Workspace
	}
	return l.Unattributed()
}

// holderKinds are the holders walk's group kinds (wire.HolderGroup.Kind)
// that hold each ledger part.
var holderKinds = map[string][]string{
	wire.PartParams:       {"parameters"},
	wire.PartGrads:        {"gradients"},
	wire.PartOptimizer:    {"optimizer_state"},
	wire.PartActivations:  {"autograd_graph"},
	wire.PartOtherTensors: {"variable", "container", "ipython_history", "traceback", "other"},
	wire.PartWorkspace:    {"torch_internal"},
}

// cause finds what grows among pts (the forecast's points) and in's
// holders walks.
func cause(in Input, pts []Point) Cause {
	var c Cause
	var xs []float64
	var ls []*wire.Ledger
	for _, p := range pts {
		if p.Ledger != nil && p.Ledger.Skipped == "" {
			xs, ls = append(xs, p.X), append(ls, p.Ledger)
		}
	}
	c.Ledgers = len(ls)
	if len(ls) >= 2 {
		for _, part := range partOrder {
			ys := make([]float64, len(ls))
			for i, l := range ls {
				ys[i] = float64(partOf(l, part))
			}
			if l, ok := fitLine(xs, ys); ok && l.Slope > c.Growth {
				c.Part, c.Growth = part, l.Slope
			}
		}
	}
	c.Holder, c.HolderGrowth, c.Largest = holder(in.Holders, holderKinds[c.Part])
	return c
}

// holder names the group of one of kinds (any kind when kinds is empty)
// that grew most from the oldest walk to the newest, or with one walk the
// largest such group (largest true; with kinds empty, the largest outside
// the model and its optimizer); "" when none fits.
func holder(walks []HolderWalk, kinds []string) (string, uint64, bool) {
	fits := func(g wire.HolderGroup) bool {
		if len(kinds) == 0 {
			return true
		}
		for _, k := range kinds {
			if g.Kind == k {
				return true
			}
		}
		return false
	}
	if len(walks) == 0 {
		return "", 0, false
	}
	newest := walks[len(walks)-1]
	if len(walks) >= 2 {
		before := map[[2]string]uint64{}
		for _, g := range walks[0].Groups {
			before[[2]string{g.Kind, g.Name}] += g.Bytes
		}
		name, grew := "", uint64(0)
		for _, g := range newest.Groups {
			was := before[[2]string{g.Kind, g.Name}]
			if fits(g) && g.Bytes > was && g.Bytes-was > grew {
				name, grew = g.Name, g.Bytes-was
			}
		}
		if name != "" {
			return name, grew, false
		}
	}
	name, most := "", uint64(0)
	for _, g := range newest.Groups {
		// with nothing saying which part grows, the model's own
		// memory, allocated once, is no candidate
		if fits(g) && g.Bytes > most && (len(kinds) > 0 || !modelKinds[g.Kind]) {
			name, most = g.Name, g.Bytes
		}
	}
	return name, 0, name != ""
}

// modelKinds are the holders of a model's own memory, allocated once
// (parameters, their gradients, the optimizer's state).
var modelKinds = map[string]bool{"parameters": true, "gradients": true, "optimizer_state": true}
