// Package forecast says, for one process on one GPU, whether its memory
// is on its way to an out-of-memory error and when: from the trend of its
// persistent memory (what stays allocated between steps: the baseline)
// and of its per-interval peak, against the memory the process can have.
// Predict is the pure part (points in, a Forecast out); join.go reads the
// points from the store; text.go says it in words.
package forecast

import (
	"github.com/gputop/gputop/wire"
)

// Unit is what a forecast counts in.
type Unit int

const (
	Steps   Unit = iota // rows labelled "Step N" (every_n_steps, gputop.snapshot(f"Step {n}"))
	Epochs              // rows labelled "Epoch N"
	Seconds             // the allocated series in windows of time, where rows give no steps
)

// Status is what a forecast concludes.
type Status int

const (
	NotEnough Status = iota // too few points to tell
	Stable                  // no growth beyond the noise
	OOM                     // growing: the limit is reached in about In units
)

func (s Status) String() string { return [...]string{"not enough data", "stable", "oom"}[s] }

// The bounds of a forecast.
const (
	// MinPoints is the fewest points a forecast is made from: the
	// slope's 95% interval needs about this many to exclude zero.
	MinPoints = 6
	// MaxPoints bounds the points used, the newest: the fit compares
	// every two points (MaxPoints² / 2 slopes).
	MaxPoints = 200
	// MinRise is the least growth over the points' span that counts,
	// whatever the fit says: the allocator's rounding and a tensor kept
	// one step longer move the baseline by a few MiB.
	MinRise = 8 << 20
	// SpreadRise: the growth over the span must also be this many times
	// the points' spread around the line (their noise).
	SpreadRise = 3
	// RecentShare: the newer half of the points must still grow at this
	// share of the whole span's rate, so a ramp that has levelled off
	// (a warm-up, a cache filled once) is not taken for a leak.
	RecentShare = 0.25
)

// Point is one moment of a process's memory on a GPU. X is its step,
// epoch, or seconds since the first point; T its time (ns). Base is the
// persistent memory then (torch's allocated at a step's row, or the least
// allocated over a window of time); Peak the most allocated since the
// previous point (0: unknown). Ledger is what Base was made of, when the
// row carries one.
type Point struct {
	X      float64
	T      int64
	Base   uint64
	Peak   uint64
	Ledger *wire.Ledger
}

// HolderWalk is one holders walk's groups (an end row's or a holders
// report's), at time T.
type HolderWalk struct {
	T      int64
	Groups []wire.HolderGroup
}

// Input is what a forecast is made from: points in ascending X, the
// memory the process can have for its allocations (Limit; 0: unknown) and
// where that figure comes from, and the holders walks known, oldest first.
type Input struct {
	Unit      Unit
	Points    []Point
	Limit     uint64
	LimitFrom string
	Holders   []HolderWalk
	// Have and Need describe the data when there are too few points
	// ("3 step rows", "6"): set by the join, which knows what it looked for.
	Have string
}

// Forecast is what Predict concludes.
type Forecast struct {
	Status Status
	Unit   Unit
	Points int    // the points used
	Have   string // NotEnough: what there is (Input.Have)
	// First and Last are the oldest and newest points' X; Base the newest
	// one's baseline; Peak the peak now: the highest of the points' peaks,
	// each brought forward along the growth to Last (a peak the 100 Hz
	// samples missed in the newest interval is seen in another), or the
	// baseline when higher
	First, Last float64
	LastT       int64 // the newest point's time
	Base, Peak  uint64
	Limit       uint64
	LimitFrom   string
	// Trend names the series whose growth counts: "baseline" or "peak"
	Trend                      string
	Growth, GrowthLo, GrowthHi float64 // bytes a unit, and the 95% interval
	// In is how many units from Last to the OOM at Growth; InLo..InHi its
	// range over the growth's interval
	In, InLo, InHi float64
	// SecondsPer is the seconds a step or epoch takes, from the rows'
	// times (0: unknown); Seconds forecasts leave it 0
	SecondsPer float64
	Cause      Cause
}

// Predict makes a forecast from in.
func Predict(in Input) Forecast {
	pts := in.Points
	if len(pts) > MaxPoints {
		pts = pts[len(pts)-MaxPoints:]
	}
	f := Forecast{Unit: in.Unit, Points: len(pts), Limit: in.Limit, LimitFrom: in.LimitFrom, Have: in.Have}
	if len(pts) < MinPoints {
		return f
	}
	last := pts[len(pts)-1]
	f.First, f.Last, f.LastT, f.Base = pts[0].X, last.X, last.T, last.Base
	f.SecondsPer = secondsPer(in.Unit, pts)

	base, baseUp := growing(pts, func(p Point) (float64, bool) { return float64(p.Base), true })
	peak, peakUp := growing(pts, func(p Point) (float64, bool) { return float64(p.Peak), p.Peak > 0 })
	var l line
	switch {
	case baseUp && peakUp && peak.Slope > base.Slope, peakUp && !baseUp:
		l, f.Trend = peak, "peak"
	case baseUp:
		l, f.Trend = base, "baseline"
	default:
		f.Status, f.Peak = Stable, peakNow(pts, 0)
		return f
	}
	f.Peak = peakNow(pts, l.Slope)
	f.Status = OOM
	f.Growth, f.GrowthLo, f.GrowthHi = l.Slope, l.Lo, l.Hi
	f.Cause = cause(in, pts)
	if in.Limit == 0 {
		return f // growing, against a limit nobody gave: In stays 0
	}
	head := float64(in.Limit) - float64(f.Peak)
	if head > 0 {
		f.In, f.InLo, f.InHi = head/l.Slope, head/l.Hi, head/l.Lo
	}
	return f
}

// peakNow is the peak at the newest point: the highest of the points'
// peaks each raised by growth (bytes a unit) for the units since it, and
// at least the newest baseline. One interval's peak comes from 100 Hz
// samples when torch's peak counter did not move, and may miss the top of
// a short step; the points before it do not all miss it.
func peakNow(pts []Point, growth float64) uint64 {
	last := pts[len(pts)-1]
	top := float64(last.Base)
	for _, p := range pts {
		if p.Peak > 0 {
			top = max(top, float64(p.Peak)+max(growth, 0)*(last.X-p.X))
		}
	}
	return uint64(top)
}

// growing fits a line through the points get gives a value for, and says
// whether it grows beyond the noise: the slope's interval above zero, the
// rise over the span at least MinRise and SpreadRise times the points'
// spread, and the newer half still rising at RecentShare of the slope.
func growing(pts []Point, get func(Point) (float64, bool)) (line, bool) {
	var xs, ys []float64
	for _, p := range pts {
		if v, ok := get(p); ok {
			xs, ys = append(xs, p.X), append(ys, v)
		}
	}
	if len(xs) < MinPoints {
		return line{}, false
	}
	l, ok := fitLine(xs, ys)
	if !ok || l.Lo <= 0 || l.Rise() < MinRise || l.Rise() < SpreadRise*l.Spread {
		return l, false
	}
	h := len(xs) / 2
	recent, ok := fitLine(xs[h:], ys[h:])
	return l, ok && recent.Slope >= RecentShare*l.Slope
}

// secondsPer is how long a step or an epoch takes, from the points'
// times: the slope of time over X (0 for Seconds, or when it cannot tell).
func secondsPer(u Unit, pts []Point) float64 {
	if u == Seconds {
		return 0
	}
	xs, ts := make([]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		xs[i], ts[i] = p.X, float64(p.T-pts[0].T)/1e9
	}
	l, ok := fitLine(xs, ts)
	if !ok || l.Slope <= 0 {
		return 0
	}
	return l.Slope
}

// SecondsToOOM is how long until the OOM at this rate, when a forecast
// predicts one and its unit's duration is known.
func (f Forecast) SecondsToOOM() (float64, bool) {
	if f.Status != OOM || f.Limit == 0 {
		return 0, false
	}
	switch {
	case f.Unit == Seconds:
		return f.In, true
	case f.SecondsPer > 0:
		return f.In * f.SecondsPer, true
	}
	return 0, false
}
