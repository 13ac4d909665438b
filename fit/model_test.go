package fit

import (
	"math"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

const mib = 1 << 20

// points of peak = a + b × v exactly, plus extra[i] bytes at the i-th value
func line(a, b uint64, values []int, extra ...int64) []Point {
	var out []Point
	for i, v := range values {
		p := a + b*uint64(v)
		if i < len(extra) {
			p = uint64(int64(p) + extra[i])
		}
		out = append(out, Point{Value: v, Peak: p})
	}
	return out
}

func TestFitRecoversAKnownLine(t *testing.T) {
	m, err := Fit(line(100*mib, 10*mib, []int{10, 20, 30, 40}))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Flat-100*mib) > 1 || math.Abs(m.PerValue-10*mib) > 1e-6 {
		t.Fatalf("fitted %g + %g × v, want %d + %d × v", m.Flat, m.PerValue, 100*mib, 10*mib)
	}
	if !m.Measured || m.MaxErrorBytes > 1 || m.Points != 4 {
		t.Fatalf("error on exact points: %+v", m)
	}
}

// The error stated is the largest distance of a measured peak from the
// fitted line, in bytes and relative to that peak.
func TestFitStatesItsErrorOnTheMeasuredPoints(t *testing.T) {
	pts := line(100*mib, 10*mib, []int{10, 20, 30}, 0, 3*mib, 0)
	m, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	var worst, rel float64
	for _, p := range pts {
		d := math.Abs(float64(p.Peak) - m.At(p.Value))
		if d > worst {
			worst, rel = d, d/float64(p.Peak)
		}
	}
	if worst < mib || math.Abs(m.MaxErrorBytes-worst) > 1 || math.Abs(m.MaxError-rel) > 1e-12 {
		t.Fatalf("stated error %g B (%g), want %g B (%g)", m.MaxErrorBytes, m.MaxError, worst, rel)
	}
	// least squares: the slope is the one that minimises the squares
	// (10 MiB exactly: the bump is in the middle), the intercept takes 1 MiB
	if math.Abs(m.PerValue-10*mib) > 1e-6 || math.Abs(m.Flat-101*mib) > 1 {
		t.Fatalf("fitted %g + %g × v", m.Flat, m.PerValue)
	}
}

func TestFitWithTwoPointsSaysItsErrorIsNotMeasured(t *testing.T) {
	m, err := Fit(line(100*mib, 10*mib, []int{10, 20}))
	if err != nil || m.Measured || m.MaxError != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := Fit(line(100*mib, 10*mib, []int{10})); err != ErrTooFew {
		t.Fatalf("one point: %v, want ErrTooFew", err)
	}
	if _, err := Fit([]Point{{Value: 8, Peak: 1}, {Value: 8, Peak: 2}}); err == nil {
		t.Fatal("two points at one value fitted a line")
	}
}

func TestPredictTheLargestValueUnderTheBudget(t *testing.T) {
	m, _ := Fit(line(100*mib, 10*mib, []int{10, 20, 30}))
	for _, c := range []struct {
		limit  uint64
		margin float64
		step   int
		want   int
	}{
		{505 * mib, 0, 1, 40},    // 500 MiB ≤ 505
		{505 * mib, 0, 10, 40},   // on the grid too
		{505 * mib, 0.05, 1, 37}, // 479.75 MiB: 37 → 470, 38 → 480
		{505 * mib, 0.05, 8, 32}, // multiples of 8 only
		{500 * mib, 0, 1, 40},    // exactly at the budget fits
	} {
		p, err := Predict(m, c.limit, c.margin, c.step, nil, []int{10, 20, 30})
		if err != nil || p.Value != c.want {
			t.Errorf("limit %d MiB margin %g step %d: %d (%v), want %d", c.limit/mib, c.margin, c.step, p.Value, err, c.want)
		}
		if err == nil && p.Peak > float64(p.Budget) {
			t.Errorf("predicted peak %g over the budget %d", p.Peak, p.Budget)
		}
	}
}

// A value that ran out of memory is an upper bound: the prediction stays
// below it, and a note says the model disagreed.
func TestPredictStaysBelowAValueThatRanOutOfMemory(t *testing.T) {
	m, _ := Fit(line(100*mib, 10*mib, []int{10, 20, 30}))
	p, err := Predict(m, 505*mib, 0, 1, []int{35, 60}, []int{10, 20, 30})
	if err != nil || p.Value != 34 {
		t.Fatalf("%d (%v), want 34", p.Value, err)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "35 ran out of memory: the measurements contradict the model") {
		t.Fatalf("notes %q", p.Notes)
	}
	// an OOM above the prediction agrees with it: no note
	p, _ = Predict(m, 505*mib, 0, 1, []int{60}, []int{10, 20, 30})
	if p.Value != 40 || len(p.Notes) != 0 {
		t.Fatalf("%d %q", p.Value, p.Notes)
	}
}

func TestPredictWithoutGrowthOrRoom(t *testing.T) {
	flat, _ := Fit(line(100*mib, 0, []int{10, 20, 30}))
	if _, err := Predict(flat, 505*mib, 0, 1, nil, nil); err == nil || !strings.Contains(err.Error(), "does not grow with the value") {
		t.Fatalf("flat: %v", err)
	}
	m, _ := Fit(line(100*mib, 10*mib, []int{10, 20, 30}))
	if _, err := Predict(m, 105*mib, 0, 16, nil, nil); err == nil || !strings.Contains(err.Error(), "no value fits") {
		t.Fatalf("no room: %v", err)
	}
	p, _ := Predict(m, 1<<40, 0, 1, nil, []int{10, 20, 30})
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "extrapolated") {
		t.Fatalf("far beyond the values measured: %q", p.Notes)
	}
}

// With a ledger at every point, each part gets its own line: parameters
// and optimizer state flat, activations with the value; the part that
// grows most limits the value.
func TestPartsFromTheLedger(t *testing.T) {
	var pts []Point
	for _, v := range []int{8, 16, 32} {
		l := &wire.Ledger{Params: 40 * mib, Grads: 40 * mib, Optimizer: 80 * mib, Activations: uint64(v) * 6 * mib, Workspace: 32 * mib}
		peak := l.Params + l.Grads + l.Optimizer + l.Activations + l.Workspace + uint64(v)*2*mib // temporaries
		pts = append(pts, Point{Value: v, Peak: peak, Ledger: l})
	}
	m, err := Fit(pts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Line{}
	for _, p := range m.Parts {
		got[p.Part] = p.Line
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1 }
	if !near(got["activations"].PerValue, 6*mib) || !near(got["params"].PerValue, 0) || !near(got["optimizer"].Flat, 80*mib) ||
		!near(got[Temporaries].PerValue, 2*mib) || !near(got[Temporaries].Flat, 0) {
		t.Fatalf("parts %+v", m.Parts)
	}
	if m.Parts[0].Part != "activations" {
		t.Fatalf("largest growth first: %+v", m.Parts)
	}
	p, err := Predict(m, 1<<30, 0.05, 1, nil, []int{8, 16, 32})
	if err != nil || p.LimitedBy != "activations" || math.Abs(p.LimitedShare-0.75) > 1e-9 {
		t.Fatalf("limited by %q %g (%v), want activations 0.75", p.LimitedBy, p.LimitedShare, err)
	}
	// one point without a ledger: no parts, and the words say why
	pts[1].Ledger = nil
	m, _ = Fit(pts)
	p, _ = Predict(m, 1<<30, 0.05, 1, nil, nil)
	if len(m.Parts) != 0 || p.LimitedBy != NoLedger {
		t.Fatalf("without a ledger at every point: %+v %q", m.Parts, p.LimitedBy)
	}
}
