package forecast

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

const mib = 1 << 20

// series makes n step points every `every` steps from step `first`: a
// baseline of base + grow·step and a peak transient above it, each moved
// by noise (uniform in ±noise bytes, seeded), a second a step.
func series(n, first, every int, base, grow, transient, noise float64, seed uint64) []Point {
	r := rand.New(rand.NewPCG(seed, 7))
	jitter := func() float64 { return (r.Float64()*2 - 1) * noise }
	pts := make([]Point, n)
	for i := range pts {
		step := float64(first + i*every)
		b := base + grow*step + jitter()
		pts[i] = Point{X: step, T: int64(step * 1e9), Base: uint64(b), Peak: uint64(b + transient + jitter())}
	}
	return pts
}

// Linear growth: the OOM step predicted is near the true one, and the
// range holds both.
func TestLinearGrowthPredictsTheOOMStep(t *testing.T) {
	const limit = 10 << 30
	base, grow, transient := float64(2<<30), float64(10*mib), float64(1<<30)
	want := (limit - base - transient) / grow // 716.8: the OOM comes at step 717
	for _, tc := range []struct {
		name  string
		noise float64
	}{{"exact", 0}, {"noisy", 20 * mib}} {
		for seed := range uint64(5) {
			pts := series(20, 10, 10, base, grow, transient, tc.noise, seed)
			f := Predict(Input{Unit: Steps, Points: pts, Limit: limit, LimitFrom: "a test's cap"})
			if f.Status != OOM {
				t.Fatalf("%s seed %d: status %v, want oom: %s", tc.name, seed, f.Status, f.Text())
			}
			at, lo, hi := f.Last+f.In, f.Last+f.InLo, f.Last+f.InHi
			if !(lo <= at && at <= hi) {
				t.Errorf("%s: the predicted step %.0f is outside its range %.0f–%.0f", tc.name, at, lo, hi)
			}
			if !(lo-1 <= want && want <= hi+1) {
				t.Errorf("%s seed %d: the true OOM step %.0f is outside the range %.0f–%.0f: %s", tc.name, seed, want, lo, hi, f.Text())
			}
			if math.Abs(at-want)/want > 0.05 {
				t.Errorf("%s seed %d: predicted step %.0f, true %.0f: more than 5%% off", tc.name, seed, at, want)
			}
			if f.SecondsPer < 0.99 || f.SecondsPer > 1.01 {
				t.Errorf("%s: %.3f s a step, want 1", tc.name, f.SecondsPer)
			}
		}
	}
	f := Predict(Input{Unit: Steps, Points: series(20, 10, 10, base, grow, transient, 0, 1), Limit: limit, LimitFrom: "a test's cap"})
	for _, want := range []string{"OOM in about 517 steps at this rate", "+10.0 MiB a step (baseline)", "5.05 GiB left of 10.00 GiB (a test's cap)", "near step 717", "~9 min"} {
		if !strings.Contains(f.Text(), want) {
			t.Errorf("the text lacks %q: %s", want, f.Text())
		}
	}
}

// Flat and noisy flat series are stable, whatever the noise's draw.
func TestFlatIsStable(t *testing.T) {
	for seed := range uint64(200) {
		for _, noise := range []float64{0, 2 * mib, 64 * mib} {
			pts := series(6+int(seed%100), 1, 1, 12<<30, 0, 4<<30, noise, seed)
			f := Predict(Input{Unit: Steps, Points: pts, Limit: 80 << 30})
			if f.Status != Stable {
				t.Fatalf("seed %d noise %.0f MiB, %d points: %v, want stable: %s", seed, noise/mib, len(pts), f.Status, f.Text())
			}
		}
	}
	f := Predict(Input{Unit: Steps, Points: series(10, 100, 100, 12<<30, 0, 4<<30, 0, 1), Limit: 80 << 30, LimitFrom: "the GPU"})
	if want := "stable: steps 100–1,000 (10 rows), baseline 12.00 GiB, peak 16.00 GiB of 80.00 GiB"; f.Text() != want {
		t.Errorf("got  %q\nwant %q", f.Text(), want)
	}
}

// A ramp that levels off (a warm-up, a cache filled once) and a single jump
// are not growth.
func TestRampThenPlateauIsStable(t *testing.T) {
	var pts []Point
	for i := range 30 {
		b := float64(min(i, 8)) * 256 * mib // grows for 8 steps, then flat for 22
		pts = append(pts, Point{X: float64(i), T: int64(i) * 1e9, Base: uint64(4<<30 + b), Peak: uint64(6<<30 + b)})
	}
	if f := Predict(Input{Unit: Steps, Points: pts, Limit: 80 << 30}); f.Status != Stable {
		t.Errorf("ramp then plateau: %s", f.Text())
	}
	pts = series(12, 1, 1, 4<<30, 0, 1<<30, 0, 1)
	for i := range pts[:3] {
		pts[i].Base -= 2 << 30 // the optimizer's state appears at step 4
		pts[i].Peak -= 2 << 30
	}
	if f := Predict(Input{Unit: Steps, Points: pts, Limit: 80 << 30}); f.Status != Stable {
		t.Errorf("a jump at the start: %s", f.Text())
	}
}

// Fewer than MinPoints points: not enough data, saying what there is.
func TestTooFewPoints(t *testing.T) {
	f := Predict(Input{Unit: Steps, Points: series(MinPoints-1, 1, 1, 1<<30, 100*mib, 0, 0, 1), Limit: 8 << 30, Have: "5 of 6 step rows"})
	if f.Status != NotEnough || f.Text() != "not enough data yet (5 of 6 step rows)" {
		t.Errorf("got %v: %s", f.Status, f.Text())
	}
}

// A peak that grows over a flat baseline (longer sequences each step)
// forecasts from the peak's trend.
func TestGrowingPeakOverFlatBaseline(t *testing.T) {
	pts := series(20, 1, 1, 4<<30, 0, 1<<30, 0, 1)
	for i := range pts {
		pts[i].Peak += uint64(i) * 50 * mib
	}
	f := Predict(Input{Unit: Steps, Points: pts, Limit: 10 << 30})
	if f.Status != OOM || f.Trend != "peak" {
		t.Fatalf("got %v (%s): %s", f.Status, f.Trend, f.Text())
	}
	// peak now 5 GiB + 19·50 MiB; 50 MiB a step to 10 GiB
	want := (10<<30 - float64(pts[19].Peak)) / (50 * mib)
	if math.Abs(f.In-want) > 0.5 {
		t.Errorf("in %.1f steps, want %.1f", f.In, want)
	}
}

// Already at the limit: the OOM is at the next step.
func TestAtTheLimit(t *testing.T) {
	pts := series(10, 1, 1, 7<<30, 64*mib, 2<<30, 0, 1)
	f := Predict(Input{Unit: Steps, Points: pts, Limit: 8 << 30})
	if f.Status != OOM || !strings.HasPrefix(f.Text(), "OOM at the next step at this rate") || f.Short() != "OOM next step" {
		t.Errorf("got %s / %s", f.Text(), f.Short())
	}
}

// The cause: the ledger part that grows, and the holder that grew between
// two holders walks.
func TestCauseFromLedgerAndHolders(t *testing.T) {
	pts := series(10, 1, 1, 2<<30, 120*mib, 0, 0, 1)
	for i := range pts {
		pts[i].Ledger = &wire.Ledger{Params: 1 << 30, Optimizer: 512 * mib, OtherTensors: uint64(i) * 120 * mib,
			Allocated: pts[i].Base}
	}
	walks := []HolderWalk{
		{T: 1, Groups: []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: 1 << 30}, {Kind: "variable", Name: "losses", Bytes: 10 * mib}}},
		{T: 2, Groups: []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: 1 << 30}, {Kind: "variable", Name: "losses", Bytes: 1090 * mib}, {Kind: "variable", Name: "batch", Bytes: 64 * mib}}},
	}
	f := Predict(Input{Unit: Epochs, Points: pts, Limit: 80 << 30, Holders: walks})
	if want := "other tensors +120.0 MiB an epoch, held by `losses` (+1.05 GiB between the holders walks)"; f.CauseText() != want {
		t.Errorf("cause %q\nwant  %q", f.CauseText(), want)
	}
	// one walk: the largest holder of the part's kind, said to be so
	f = Predict(Input{Unit: Epochs, Points: pts, Limit: 80 << 30, Holders: walks[1:]})
	if want := "other tensors +120.0 MiB an epoch, held by `losses` (the largest such holder at the last holders walk)"; f.CauseText() != want {
		t.Errorf("cause %q\nwant  %q", f.CauseText(), want)
	}
	// no ledger at the rows
	for i := range pts {
		pts[i].Ledger = nil
	}
	// one walk: the largest holder outside the model and its optimizer
	f = Predict(Input{Unit: Epochs, Points: pts, Limit: 80 << 30, Holders: walks[1:]})
	if want := "unknown (no ledger at the rows); the largest holder outside the model and its optimizer at the last holders walk: `losses`"; f.CauseText() != want {
		t.Errorf("cause %q\nwant  %q", f.CauseText(), want)
	}
	f = Predict(Input{Unit: Epochs, Points: pts, Limit: 80 << 30})
	if want := "unknown (no ledger at the rows)"; f.CauseText() != want {
		t.Errorf("cause %q, want %q", f.CauseText(), want)
	}
}

// A forecast in time counts minutes.
func TestForecastInTime(t *testing.T) {
	var pts []Point
	for i := range 30 {
		s := float64(i * 10)
		pts = append(pts, Point{X: s, T: int64(s * 1e9), Base: uint64(1<<30 + s*mib), Peak: uint64(2<<30 + s*mib)})
	}
	f := Predict(Input{Unit: Seconds, Points: pts, Limit: 4 << 30})
	// peak now 2 GiB + 290 MiB; 1 MiB a second to 4 GiB: 1758 s
	if f.Status != OOM || !strings.HasPrefix(f.Text(), "OOM in about 29 min at this rate: +60.0 MiB a minute") {
		t.Errorf("got %s", f.Text())
	}
	if s, ok := f.SecondsToOOM(); !ok || math.Abs(s-1758) > 1 {
		t.Errorf("seconds to OOM %.0f %v, want 1758", s, ok)
	}
}

// The fit's interval narrows with the points and holds the true slope.
func TestSlopeInterval(t *testing.T) {
	misses := 0
	for seed := range uint64(200) {
		pts := series(30, 0, 1, 1<<30, 5*mib, 0, 40*mib, seed)
		xs, ys := make([]float64, len(pts)), make([]float64, len(pts))
		for i, p := range pts {
			xs[i], ys[i] = p.X, float64(p.Base)
		}
		l, _ := fitLine(xs, ys)
		if l.Lo > 5*mib || l.Hi < 5*mib {
			misses++
		}
	}
	// a 95% interval: about 10 misses in 200 draws
	if misses > 25 {
		t.Errorf("the interval missed the true slope %d times in 200", misses)
	}
}

// Past MaxPoints points, the newest are used.
func TestAtMostMaxPoints(t *testing.T) {
	pts := series(3*MaxPoints, 1, 1, 2<<30, 10*mib, 1<<30, 0, 1)
	f := Predict(Input{Unit: Steps, Points: pts, Limit: 80 << 30})
	if f.Points != MaxPoints || f.First != float64(2*MaxPoints+1) || f.Last != float64(3*MaxPoints) {
		t.Errorf("points %d, steps %.0f–%.0f", f.Points, f.First, f.Last)
	}
}

// The newest interval's peak came from samples that missed the top of its
// step: the peak now is still the one the intervals before it show, flat or
// brought forward along the growth, and the OOM is placed from it.
func TestPeakNowSeesWhatTheNewestIntervalMissed(t *testing.T) {
	flat := series(20, 1, 1, 4<<30, 0, 1<<30, 0, 1)
	flat[19].Peak = flat[19].Base // the samples saw only the baseline
	f := Predict(Input{Unit: Steps, Points: flat, Limit: 10 << 30})
	if f.Status != Stable || f.Peak != 5<<30 {
		t.Errorf("flat: got %v, peak %d MiB; want stable at 5120 MiB", f.Status, f.Peak/mib)
	}
	grow := series(20, 1, 1, 4<<30, 64*mib, 1<<30, 0, 1)
	grow[19].Peak = grow[19].Base
	g := Predict(Input{Unit: Steps, Points: grow, Limit: 10 << 30})
	want := float64(grow[19].Base + 1<<30)
	if g.Status != OOM || math.Abs(float64(g.Peak)-want) > mib {
		t.Fatalf("growing: got %v, peak %d MiB; want an OOM, peak %.0f MiB", g.Status, g.Peak/mib, want/mib)
	}
	if in := (10<<30 - want) / (64 * mib); math.Abs(g.In-in) > 0.5 {
		t.Errorf("growing: OOM in %.1f steps, want %.1f", g.In, in)
	}
}
