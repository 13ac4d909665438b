// The trend of a series of points: a Theil–Sen line with the confidence
// interval of its slope, and how far the points stray from it.

package forecast

import (
	"math"
	"slices"
)

// z is the standard normal quantile of the slope's interval: 95%.
const z = 1.96

// line is a robust straight line through points: Slope, the median of the
// slopes between every two points of different x (Theil–Sen), and Lo, Hi,
// the interval of that median that holds the true slope 95 times in 100
// (Sen 1968: the order statistics of the pairwise slopes around the
// median, through Kendall's tau's variance). Spread is the residuals'
// median absolute deviation scaled to a standard deviation (1.4826 ×
// MAD): how far a point strays from the line when nothing grows.
type line struct {
	Slope, Lo, Hi float64
	Intercept     float64 // median of y − Slope·x
	Spread        float64
	N             int
	X0, X1        float64 // the first and last x
}

// At is the line's value at x.
func (l line) At(x float64) float64 { return l.Intercept + l.Slope*x }

// Rise is what the line climbs over the points' span.
func (l line) Rise() float64 { return l.Slope * (l.X1 - l.X0) }

// fitLine fits a line through (xs[i], ys[i]), xs ascending. It needs two
// points of different x; false otherwise. O(n² log n): callers bound n
// (MaxPoints).
func fitLine(xs, ys []float64) (line, bool) {
	n := len(xs)
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := range n {
		for j := i + 1; j < n; j++ {
			if dx := xs[j] - xs[i]; dx != 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	m := len(slopes)
	if m == 0 {
		return line{}, false
	}
	slices.Sort(slopes)
	l := line{Slope: median(slopes), N: n, X0: xs[0], X1: xs[n-1]}
	c := z * math.Sqrt(float64(n)*float64(n-1)*float64(2*n+5)/18)
	lo := int(math.Floor((float64(m) - c) / 2))
	hi := int(math.Ceil((float64(m) + c) / 2))
	l.Lo = slopes[min(max(lo, 0), m-1)]
	l.Hi = slopes[min(max(hi, 0), m-1)]
	res := make([]float64, n)
	for i := range n {
		res[i] = ys[i] - l.Slope*xs[i]
	}
	slices.Sort(res)
	l.Intercept = median(res)
	for i := range res {
		res[i] = math.Abs(res[i] - l.Intercept)
	}
	slices.Sort(res)
	l.Spread = 1.4826 * median(res)
	return l, true
}

// median of a sorted, non-empty slice.
func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
