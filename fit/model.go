package fit

import (
	"errors"
	"fmt"
	"math"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Point is one value's measurement: the allocator's peak once it held
// (torch's allocated_bytes.all.peak), and the ledger of the child's row
// nearest that peak where its rows carry one.
type Point struct {
	Value  int
	Peak   uint64
	Ledger *wire.Ledger
}

// Line is a + b × value, in bytes.
type Line struct {
	Flat     float64 `json:"flat_bytes"`      // a: what does not grow with the value
	PerValue float64 `json:"per_value_bytes"` // b: what one more unit of the value adds
}

// At is the line's bytes at value v.
func (l Line) At(v int) float64 { return l.Flat + l.PerValue*float64(v) }

// PartLine is how one part of the ledger grows with the value.
type PartLine struct {
	Part string `json:"part"` // wire.Part* names; "temporaries": the peak beyond the ledger's parts
	Line
}

// Model is the peak's line fitted to the measured points by least
// squares, how far it is from them, and, where every point carries a
// ledger, each part's own line.
type Model struct {
	Line
	Points int `json:"points"`
	// the largest distance of a measured peak from the line: relative to
	// that peak, and in bytes; Measured false with two points (a line
	// passes through both: nothing is left to measure an error with)
	MaxError      float64 `json:"max_error"`
	MaxErrorBytes float64 `json:"max_error_bytes"`
	Measured      bool    `json:"error_measured"`
	// each ledger part's line, largest growth first; empty when a point
	// has no ledger
	Parts []PartLine `json:"parts,omitempty"`
}

// ErrTooFew is a fit with fewer than two measured values: a slope needs two.
var ErrTooFew = errors.New("fewer than two values were measured: a line needs two")

// Fit fits the peak's line to points (at least two distinct values).
func Fit(points []Point) (Model, error) {
	if len(points) < 2 {
		return Model{}, ErrTooFew
	}
	xs := make([]float64, len(points))
	ys := make([]float64, len(points))
	for i, p := range points {
		xs[i], ys[i] = float64(p.Value), float64(p.Peak)
	}
	line, ok := leastSquares(xs, ys)
	if !ok {
		return Model{}, errors.New("every measured point has the same value: a line needs two")
	}
	m := Model{Line: line, Points: len(points), Measured: len(points) > 2}
	for _, p := range points {
		d := math.Abs(float64(p.Peak) - line.At(p.Value))
		m.MaxErrorBytes = math.Max(m.MaxErrorBytes, d)
		if p.Peak > 0 {
			m.MaxError = math.Max(m.MaxError, d/float64(p.Peak))
		}
	}
	if !m.Measured {
		m.MaxError, m.MaxErrorBytes = 0, 0 // what is left is rounding
	}
	m.Parts = fitParts(points, xs, line)
	return m, nil
}

// leastSquares is the ordinary least-squares line through (xs, ys); false
// when the xs do not differ.
func leastSquares(xs, ys []float64) (Line, bool) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return Line{}, false
	}
	b := sxy / sxx
	return Line{Flat: my - b*mx, PerValue: b}, true
}

// partsOf are the ledger's parts in the order wire lists them.
var partsOf = []struct {
	name string
	get  func(*wire.Ledger) uint64
}{
	{wire.PartParams, func(l *wire.Ledger) uint64 { return l.Params }},
	{wire.PartGrads, func(l *wire.Ledger) uint64 { return l.Grads }},
	{wire.PartOptimizer, func(l *wire.Ledger) uint64 { return l.Optimizer }},
	{wire.PartActivations, func(l *wire.Ledger) uint64 { return l.Activations }},
	{wire.PartOtherTensors, func(l *wire.Ledger) uint64 { return l.OtherTensors }},
	{wire.PartWorkspace, func(l *wire.Ledger) uint64 { return l.Workspace }},
}

// Temporaries names what the peak holds beyond the ledger's parts: what
// was allocated at the peak and freed before the row (a step's
// temporaries), and what the walk could not attribute.
const Temporaries = "temporaries"

// fitParts is each ledger part's line, and the temporaries' (the peak's
// line less the parts'), largest growth first; nil unless every point has
// a ledger.
func fitParts(points []Point, xs []float64, peak Line) []PartLine {
	for _, p := range points {
		if p.Ledger == nil || p.Ledger.Skipped != "" {
			return nil
		}
	}
	var out []PartLine
	rest := peak
	ys := make([]float64, len(points))
	for _, part := range partsOf {
		for i, p := range points {
			ys[i] = float64(part.get(p.Ledger))
		}
		l, _ := leastSquares(xs, ys)
		out = append(out, PartLine{Part: part.name, Line: l})
		rest.Flat -= l.Flat
		rest.PerValue -= l.PerValue
	}
	out = append(out, PartLine{Part: Temporaries, Line: rest})
	// largest growth first; ties (flat parts) keep the ledger's order
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].PerValue > out[j-1].PerValue; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Prediction is the largest value the model puts under the budget, and
// what it rests on.
type Prediction struct {
	// Value is the largest value on the grid (multiples of Step) whose
	// predicted peak is within Budget; 0: none is
	Value  int     `json:"value"`
	Peak   float64 `json:"peak_bytes"`   // the model's peak at Value
	Budget uint64  `json:"budget_bytes"` // the limit less the margin
	Step   int     `json:"step"`
	// ErrorValues is the model's largest error on the measured points in
	// units of the value: how far off Value may be
	ErrorValues float64 `json:"error_values"`
	// LimitedBy is the part whose growth uses up the budget, and its
	// share of the growth (0 when there is no ledger to say)
	LimitedBy    string  `json:"limited_by"`
	LimitedShare float64 `json:"limited_share,omitempty"`
	// Notes say where the prediction is weaker than the model makes it
	// look: values that ran out of memory below it, extrapolation
	Notes []string `json:"notes,omitempty"`
}

// NoLedger is what limits the value when the rows carry no ledger: the
// part that grows with the value, not told apart.
const NoLedger = "activations and temporaries (no ledger at the rows)"

// Predict finds the largest multiple of step whose peak the model puts
// at most limit × (1 − margin). ooms are the values that ran out of
// memory: the prediction stays below the smallest, and a note says when
// the model disagrees with one. measured are the values behind the model,
// for the note on extrapolation.
func Predict(m Model, limit uint64, margin float64, step int, ooms, measured []int) (Prediction, error) {
	if step < 1 {
		step = 1
	}
	p := Prediction{Budget: uint64(float64(limit) * (1 - margin)), Step: step}
	if m.PerValue > 0 {
		p.ErrorValues = m.MaxErrorBytes / m.PerValue
	}
	p.LimitedBy, p.LimitedShare = limitedBy(m)
	budget := float64(p.Budget)
	if m.PerValue <= 0 {
		// flat or shrinking: no value is the largest
		return p, fmt.Errorf("the peak does not grow with the value (%s per unit): no largest value to predict", signedBytes(m.PerValue))
	}
	v := math.Floor((budget - m.Flat) / m.PerValue)
	if v > MaxValue {
		v = MaxValue
	}
	n := int(v) / step * step
	// the line's rounding must not put the value a byte over
	for n > 0 && m.At(n) > budget {
		n -= step
	}
	lowestOOM := 0
	for _, o := range ooms {
		if lowestOOM == 0 || o < lowestOOM {
			lowestOOM = o
		}
	}
	if lowestOOM > 0 && n >= lowestOOM {
		p.Notes = append(p.Notes, fmt.Sprintf("the model puts %d at %s, within the budget, but %d ran out of memory: the measurements contradict the model; the prediction is kept below %d",
			lowestOOM, units.Bytes(uint64(math.Max(m.At(lowestOOM), 0))), lowestOOM, lowestOOM))
		n = (lowestOOM - 1) / step * step
	}
	if n < step {
		p.Value = 0
		return p, fmt.Errorf("no value fits: the model puts even %d at %s, over the budget of %s", step, units.Bytes(uint64(math.Max(m.At(step), 0))), units.Bytes(p.Budget))
	}
	p.Value, p.Peak = n, m.At(n)
	top := 0
	for _, v := range measured {
		top = max(top, v)
	}
	if top > 0 && n > 2*top {
		p.Notes = append(p.Notes, fmt.Sprintf("%d is %.1f× the largest value measured (%d): the line is extrapolated that far", n, float64(n)/float64(top), top))
	}
	return p, nil
}

// limitedBy is the part that grows most with the value and its share of
// the growth, or NoLedger.
func limitedBy(m Model) (string, float64) {
	if len(m.Parts) == 0 || m.PerValue <= 0 {
		return NoLedger, 0
	}
	top := m.Parts[0]
	if top.PerValue <= 0 {
		return NoLedger, 0
	}
	return top.Part, math.Min(top.PerValue/m.PerValue, 1)
}

func signedBytes(f float64) string {
	if f < 0 {
		return "-" + units.Bytes(uint64(-f))
	}
	return units.Bytes(uint64(f))
}
