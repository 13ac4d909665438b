package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// sample is what the tests fed, kept in full as the reference the bounded
// series is checked against.
type sample struct {
	t int64
	v uint64
}

// ref is the brute-force truth over every sample ever added.
type ref []sample

// in returns the samples with from <= t < to (r is in time order).
func (r ref) in(from, to int64) ref {
	i := sort.Search(len(r), func(i int) bool { return r[i].t >= from })
	j := sort.Search(len(r), func(i int) bool { return r[i].t >= to })
	if j < i {
		j = i
	}
	return r[i:j]
}

func (r ref) agg() (lo, hi, last uint64, ok bool) {
	for i, p := range r {
		if i == 0 {
			lo, hi = p.v, p.v
		}
		lo, hi, last, ok = min(lo, p.v), max(hi, p.v), p.v, true
	}
	return
}

func (r ref) at(t int64) (uint64, bool) {
	var v uint64
	ok := false
	for _, p := range r {
		if p.t > t {
			break
		}
		v, ok = p.v, true
	}
	return v, ok
}

func feed(s *series, r ref) {
	for _, p := range r {
		s.add(p.t, p.v)
	}
}

// smallOpt has a raw ring of 500 samples and three tiers, so a few seconds
// of 1 kHz data exercise every level.
func smallOpt() Options {
	return Options{
		RawCapacity: 500,
		Tiers: []TierSpec{
			{10 * time.Millisecond, 150},  // 1.5 s
			{100 * time.Millisecond, 60},  // 6 s
			{1000 * time.Millisecond, 30}, // 30 s
		},
	}
}

// walk makes n samples every step ns from t0: a random walk with gaps and
// occasional one-sample spikes, so min, max and last all differ per bucket.
func walk(rng *rand.Rand, t0, step int64, n int) ref {
	out := make(ref, 0, n)
	v := uint64(1 << 30)
	t := t0
	for range n {
		t += step
		if rng.IntN(200) == 0 {
			t += step * int64(rng.IntN(300)) // a gap with no samples
		}
		v = uint64(int64(v) + int64(rng.IntN(2001)-1000))
		x := v
		if rng.IntN(500) == 0 {
			x += 4 << 30
		}
		out = append(out, sample{t, x})
	}
	return out
}

func TestRingWrapAround(t *testing.T) {
	r := newRing[int](5)
	for i := range 3 {
		r.push(i)
	}
	if r.len() != 3 || r.at(0) != 0 || r.at(2) != 2 || *r.lastPtr() != 2 {
		t.Fatalf("before wrap: len %d at0 %d at2 %d last %d", r.len(), r.at(0), r.at(2), *r.lastPtr())
	}
	for i := 3; i < 13; i++ {
		r.push(i)
		if want := min(i+1, 5); r.len() != want {
			t.Fatalf("after %d pushes len %d, want %d", i+1, r.len(), want)
		}
		if *r.lastPtr() != i {
			t.Fatalf("after push %d last is %d", i, *r.lastPtr())
		}
		oldest := max(0, i-4)
		for j := range r.len() {
			if r.at(j) != oldest+j {
				t.Fatalf("after push %d: at(%d) = %d, want %d", i, j, r.at(j), oldest+j)
			}
		}
	}
	*r.lastPtr() = 99
	if r.at(4) != 99 {
		t.Fatalf("lastPtr does not point at the newest element")
	}
	if cap(r.buf) != 5 {
		t.Fatalf("ring of 5 holds a backing array of %d", cap(r.buf))
	}
}

func TestRingCapacityIsExact(t *testing.T) {
	// The backing array must end at the limit, not at append's next size.
	r := newRing[point](60_000)
	for i := range 70_000 {
		r.push(point{int64(i), 0})
	}
	if cap(r.buf) != 60_000 || r.len() != 60_000 || r.at(0).t != 10_000 {
		t.Fatalf("cap %d len %d oldest %d", cap(r.buf), r.len(), r.at(0).t)
	}
}

func TestTiersMinMaxLastPerBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	o := smallOpt()
	s := newSeries(o)
	data := walk(rng, 1_000*ms+3, ms, 20_000) // ~20 s at 1 kHz plus gaps
	feed(s, data)
	for i, tr := range s.tiers {
		w := int64(o.Tiers[i].Width)
		if tr.buckets.len() != o.Tiers[i].Buckets {
			t.Fatalf("tier %v holds %d buckets, want %d (full)", o.Tiers[i].Width, tr.buckets.len(), o.Tiers[i].Buckets)
		}
		var prev int64 = math.MinInt64
		for j := range tr.buckets.len() {
			b := tr.buckets.at(j)
			if b.start%w != 0 || b.start <= prev {
				t.Fatalf("tier %v bucket %d start %d: not aligned or not increasing after %d", o.Tiers[i].Width, j, b.start, prev)
			}
			prev = b.start
			lo, hi, last, ok := data.in(b.start, b.start+w).agg()
			if !ok {
				t.Fatalf("tier %v bucket at %d holds no sample", o.Tiers[i].Width, b.start)
			}
			if b.min != lo || b.max != hi || b.last != last {
				t.Fatalf("tier %v bucket at %d: min/max/last %d/%d/%d, want %d/%d/%d",
					o.Tiers[i].Width, b.start, b.min, b.max, b.last, lo, hi, last)
			}
		}
		// The newest bucket holds the newest sample; the ring keeps the
		// newest Buckets non-empty buckets, so nothing between is missing.
		if newest := tr.buckets.at(tr.buckets.len() - 1); newest.start != data[len(data)-1].t/w*w {
			t.Fatalf("tier %v newest bucket %d, last sample %d", o.Tiers[i].Width, newest.start, data[len(data)-1].t)
		}
		first := tr.buckets.at(0).start
		seen := map[int64]bool{}
		for _, p := range data.in(first, math.MaxInt64) {
			seen[p.t/w*w] = true
		}
		if len(seen) != tr.buckets.len() {
			t.Fatalf("tier %v: %d non-empty buckets since %d, ring holds %d", o.Tiers[i].Width, len(seen), first, tr.buckets.len())
		}
	}
	if got := s.raw.len(); got != o.RawCapacity {
		t.Fatalf("raw holds %d, want %d", got, o.RawCapacity)
	}
	if s.oldestRaw() != data[len(data)-o.RawCapacity].t {
		t.Fatalf("oldest raw %d, want %d", s.oldestRaw(), data[len(data)-o.RawCapacity].t)
	}
}

func TestNegativeTimesBucketByFloor(t *testing.T) {
	s := newSeries(Options{RawCapacity: 4, Tiers: []TierSpec{{10, 4}}})
	s.add(-15, 1)
	s.add(-11, 2)
	s.add(-10, 3)
	b0, b1 := s.tiers[0].buckets.at(0), s.tiers[0].buckets.at(1)
	if b0.start != -20 || b0.last != 2 || b1.start != -10 || b1.last != 3 {
		t.Fatalf("buckets %+v %+v, want starts -20 and -10", b0, b1)
	}
}

func TestMonotonicClamp(t *testing.T) {
	st := New(smallOpt())
	k := Key{0, 0, NVMLUsed}
	st.AddNVML(0, 100*ms, 10, 0)
	st.AddNVML(0, 50*ms, 20, 0) // a late sample from another clock reading
	st.AddNVML(0, 101*ms, 30, 0)
	if v, at, ok := st.Latest(k); !ok || v != 30 || at != 101*ms {
		t.Fatalf("latest %d at %d", v, at)
	}
	if v, ok := st.ValueAt(k, 100*ms); !ok || v != 20 {
		t.Fatalf("value at 100 ms = %d %v; the late sample belongs at 100 ms", v, ok)
	}
	if _, ok := st.ValueAt(k, 60*ms); ok {
		t.Fatalf("a value exists before the first sample")
	}
	if st.Count(k) != 3 {
		t.Fatalf("count %d", st.Count(k))
	}
	cols := st.Columns(k, 0, 200*ms, 200)
	if c := cols[50]; c.OK {
		t.Fatalf("column at 50 ms holds %+v; the clamped sample moved to 100 ms", c)
	}
	if c := cols[100]; !c.OK || c.Min != 10 || c.Max != 20 || c.Last != 20 {
		t.Fatalf("column at 100 ms %+v", c)
	}
}

// checkColumns compares cols over [from, to) with the truth. Columns that
// only raw samples answer must be exact; otherwise each column's Min/Max
// must bound the samples inside it and stay inside the samples within w of
// it (w: the widest bucket that answered).
func checkColumns(t *testing.T, name string, data ref, s *series, cols []Column, from, to int64, w int64) {
	t.Helper()
	n := int64(len(cols))
	span := to - from
	rawFrom := s.oldestRaw()
	for i, c := range cols {
		cs := from + (int64(i)*span+n-1)/n // first time that maps to column i
		ce := from + ((int64(i)+1)*span+n-1)/n
		lo, hi, last, ok := data.in(cs, ce).agg()
		exact := w == 0 && cs >= rawFrom
		if exact {
			if c.OK != ok || (ok && (c.Min != lo || c.Max != hi || c.Last != last)) {
				t.Fatalf("%s: column %d [%d,%d) = %+v, want exact %d/%d/%d ok=%v", name, i, cs, ce, c, lo, hi, last, ok)
			}
			continue
		}
		if ok && !c.OK {
			t.Fatalf("%s: column %d [%d,%d) empty but holds samples", name, i, cs, ce)
		}
		if ok && (c.Max < hi || c.Min > lo) {
			t.Fatalf("%s: column %d [%d,%d) min/max %d/%d do not bound %d/%d", name, i, cs, ce, c.Min, c.Max, lo, hi)
		}
		if c.OK {
			wlo, whi, _, wok := data.in(cs-w, ce+w).agg()
			if !wok || c.Max > whi || c.Min < wlo {
				t.Fatalf("%s: column %d [%d,%d) min/max %d/%d outside samples within %d ns (%d/%d)", name, i, cs, ce, c.Min, c.Max, w, wlo, whi)
			}
		}
		if c.OK {
			// Last is the newest value known for the column: a raw
			// sample's, or the last of a bucket that overlaps it.
			found := false
			for _, p := range data.in(cs-w, ce+w) {
				found = found || p.v == c.Last
			}
			if !found {
				t.Fatalf("%s: column %d Last %d is no sample's value in [%d,%d)", name, i, c.Last, cs-w, ce+w)
			}
		}
		if ok && w == 0 && c.Last != last {
			t.Fatalf("%s: column %d Last %d, want the newest sample %d", name, i, c.Last, last)
		}
	}
}

func TestColumnsEveryLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	o := smallOpt()
	s := newSeries(o)
	start := 10_000 * ms
	data := walk(rng, start, ms, 12_000) // ~12.5 s
	feed(s, data)
	end := data[len(data)-1].t + 1
	rawFrom := s.oldestRaw()
	t.Logf("raw from %d ms, tiers from %d/%d/%d ms, end %d ms", rawFrom/ms,
		s.oldest(1)/ms, s.oldest(2)/ms, s.oldest(3)/ms, end/ms)

	cases := []struct {
		name     string
		from, to int64
		n        int
		w        int64 // widest bucket expected to answer (0: raw only)
	}{
		// columns of 1 ms: raw
		{"raw", end - 200*ms, end, 200, 0},
		// a window ending before the raw ring's oldest sample, raw resolution asked
		{"older than raw", rawFrom - 300*ms, rawFrom - 100*ms, 200, int64(10 * time.Millisecond)},
		// straddles the raw ring's start at raw resolution
		{"straddles raw and tier", rawFrom - 100*ms, rawFrom + 100*ms, 200, int64(10 * time.Millisecond)},
		// 25 ms columns: tier 10 ms
		{"tier 10ms", end - 1000*ms, end, 40, int64(10 * time.Millisecond)},
		// 250 ms columns: tier 100 ms
		{"tier 100ms", end - 5000*ms, end, 20, int64(100 * time.Millisecond)},
		// 2 s columns: tier 1 s
		{"tier 1s", end - 12_000*ms, end, 6, int64(time.Second)},
		// 10 ms columns far back: only the 100 ms and 1 s tiers reach it
		{"older than first tier", s.oldest(1) - 2000*ms, s.oldest(1) - 1000*ms, 100, int64(time.Second)},
		// odd sizes and alignments
		{"odd", start + 777*ms + 3, end - 13, 137, int64(time.Second)},
	}
	for _, c := range cases {
		cols := s.columns(c.from, c.to, c.n)
		if len(cols) != c.n {
			t.Fatalf("%s: %d columns", c.name, len(cols))
		}
		checkColumns(t, c.name, data, s, cols, c.from, c.to, c.w)
	}

	// straddling window: the raw side is exact, the tier side is filled
	cols := s.columns(rawFrom-100*ms, rawFrom+100*ms, 200)
	for i := range 100 {
		// a 1 ms column is filled iff the 10 ms bucket around it holds samples
		cs := rawFrom - 100*ms + int64(i)*ms
		b := cs - cs%(10*ms)
		if want := len(data.in(b, b+10*ms)) > 0; cols[i].OK != want {
			t.Fatalf("straddle: tier column %d OK=%v, want %v", i, cols[i].OK, want)
		}
	}
	for i := 100; i < 200; i++ {
		p := data.in(rawFrom-100*ms+int64(i)*ms, rawFrom-100*ms+int64(i+1)*ms)
		if len(p) > 0 && (!cols[i].OK || cols[i].Last != p[len(p)-1].v) {
			t.Fatalf("straddle: raw column %d = %+v, want last %d", i, cols[i], p[len(p)-1].v)
		}
	}
}

// TestColumnsNoGapsFromCoarseTiers: when only buckets wider than a column
// hold a window, every column they span is filled, so the chart's line has
// no holes; columns before the first and after the last sample stay empty.
func TestColumnsNoGapsFromCoarseTiers(t *testing.T) {
	s := newSeries(smallOpt())
	for i := range 20_000 { // 20 s at 1 kHz, steady, from t = 1 s
		s.add(int64(1000+i)*ms, uint64(100+i%7))
	}
	s.add(21_000*ms, 1000)
	// [2 s, 3 s) is older than the 10 ms and 100 ms tiers: only 1 s buckets
	if s.oldest(2) <= 3000*ms {
		t.Fatalf("setup: the 100 ms tier still reaches 3 s")
	}
	cols := s.columns(2000*ms, 3000*ms, 100)
	for i, c := range cols {
		if !c.OK || c.Min != 100 || c.Max != 106 {
			t.Fatalf("column %d = %+v, want filled from the 1 s bucket", i, c)
		}
	}
	cols = s.columns(0, 2000*ms, 100)
	for i, c := range cols {
		if c.OK != (i >= 50) {
			t.Fatalf("column %d (from %d ms) OK=%v; the first sample is at 1000 ms", i, i*20, c.OK)
		}
	}
	cols = s.columns(20_000*ms, 23_000*ms, 3)
	if !cols[0].OK || !cols[1].OK || cols[1].Max != 1000 || cols[2].OK {
		t.Fatalf("columns around the last sample: %+v", cols)
	}
}

func TestColumnsRandomWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	o := smallOpt()
	s := newSeries(o)
	data := walk(rng, 0, ms, 25_000)
	feed(s, data)
	end := data[len(data)-1].t + 1
	first := s.oldest(len(s.tiers))
	for range 120 {
		from := first + rng.Int64N(end-first)
		to := from + 1 + rng.Int64N(end-from)
		n := 1 + rng.IntN(200)
		cols := s.columns(from, to, n)
		checkColumns(t, fmt.Sprintf("[%d,%d)/%d", from, to, n), data, s, cols, from, to, int64(time.Second))
	}
}

func TestColumnsEdgeArguments(t *testing.T) {
	s := newSeries(smallOpt())
	if c := s.columns(0, 10, 3); len(c) != 3 || c[0].OK {
		t.Fatalf("empty series: %+v", c)
	}
	s.add(5, 7)
	if c := s.columns(0, 10, 0); len(c) != 0 {
		t.Fatalf("n=0: %+v", c)
	}
	if c := s.columns(10, 10, 2); c[0].OK || c[1].OK {
		t.Fatalf("empty window: %+v", c)
	}
	// the whole int64 range must not overflow the column arithmetic
	c := s.columns(math.MinInt64, math.MaxInt64, 160)
	if !c[80].OK || c[80].Max != 7 {
		t.Fatalf("whole range: column 80 = %+v", c[80])
	}
	// more columns than nanoseconds
	c = s.columns(0, 10, 100)
	if !c[50].OK || c[50].Last != 7 {
		t.Fatalf("100 columns over 10 ns: %+v", c[50])
	}
}

func TestValueAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	o := smallOpt()
	s := newSeries(o)
	data := walk(rng, 5_000*ms, ms, 15_000)
	feed(s, data)
	rawFrom := s.oldestRaw()
	end := data[len(data)-1].t
	if _, _, ok := s.valueAt(data[0].t - 1); ok {
		t.Fatalf("value before the first sample")
	}
	// inside the raw window: exact, with the sample's own time
	for range 500 {
		at := rawFrom + rng.Int64N(end-rawFrom+50*ms)
		v, vt, ok := s.valueAt(at)
		want, _ := data.at(at)
		if !ok || v != want || vt > at {
			t.Fatalf("raw: valueAt(%d) = %d at %d, want %d", at, v, vt, want)
		}
	}
	// older: the last value of the finest bucket holding at
	for range 500 {
		at := s.oldest(len(s.tiers)) + rng.Int64N(rawFrom-s.oldest(len(s.tiers)))
		v, vt, ok := s.valueAt(at)
		var w int64
		for l := 1; l <= len(s.tiers); l++ {
			if s.oldest(l) <= at {
				w = s.tiers[l-1].width
				break
			}
		}
		// the newest non-empty bucket starting at or before at
		var bs int64
		for _, p := range data {
			if p.t-p.t%w <= at {
				bs = p.t - p.t%w
			}
		}
		_, _, last, _ := data.in(bs, bs+w).agg()
		if !ok || v != last || vt != bs {
			t.Fatalf("tier: valueAt(%d) = %d at %d, want bucket-last %d at %d", at, v, vt, last, bs)
		}
	}
}

func TestMaxIn(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	o := smallOpt()
	s := newSeries(o)
	data := walk(rng, 0, ms, 25_000)
	feed(s, data)
	end := data[len(data)-1].t + 1
	rawFrom := s.oldestRaw()
	first := s.oldest(len(s.tiers))
	for range 1000 {
		var a, b int64
		if rng.IntN(2) == 0 { // inside the raw window: exact
			a = rawFrom + rng.Int64N(end-rawFrom)
		} else {
			a = first + rng.Int64N(end-first)
		}
		b = a + 1 + rng.Int64N(end+10*ms-a)
		got, ok := s.maxIn(a, b)
		_, want, _, wok := data.in(a, b).agg()
		if a >= rawFrom {
			if got != want || ok != wok {
				t.Fatalf("maxIn(%d,%d) = %d %v, want exactly %d %v", a, b, got, ok, want, wok)
			}
			continue
		}
		_, bound, _, _ := data.in(a-int64(time.Second), b+int64(time.Second)).agg()
		if wok && (!ok || got < want || got > bound) {
			t.Fatalf("maxIn(%d,%d) = %d, want between %d and %d", a, b, got, want, bound)
		}
	}
	if _, ok := s.maxIn(end+ms, end+2*ms); ok {
		t.Fatalf("max after the last sample")
	}
}

// TestSpikeVisibleAtEveryZoom feeds 24 h of one series with default options
// (1 kHz where it matters, 10 Hz elsewhere to keep the test fast) and
// 5 ms spikes of different ages, and checks that each spike is the Max of
// its own column, at 160 columns, in every window from 10 s to 24 h that
// holds it, and that it does not leak into columns farther than one bucket.
func TestSpikeVisibleAtEveryZoom(t *testing.T) {
	const (
		base  = uint64(1 << 30)
		spike = uint64(5 << 30)
	)
	day := int64(24 * time.Hour)
	t0 := int64(1_700_000_000) * int64(time.Second)
	end := t0 + day
	// oldest first, so the spikes come in time order
	ages := []time.Duration{23*time.Hour + 30*time.Minute, 20 * time.Hour, 10 * time.Hour,
		5 * time.Hour, 100 * time.Minute, 55 * time.Minute, 25 * time.Minute, 8 * time.Minute,
		3 * time.Minute, 45 * time.Second, 20 * time.Second, 3 * time.Second}
	var spikes []int64
	for _, a := range ages {
		spikes = append(spikes, end-int64(a))
	}
	dense := func(t int64) bool {
		if t >= end-int64(2*time.Minute) {
			return true
		}
		for _, sp := range spikes {
			if t >= sp-int64(3*time.Second) && t < sp+int64(3*time.Second) {
				return true
			}
		}
		return false
	}
	st := New(DefaultOptions())
	k := Key{0, 0, NVMLUsed}
	rng := rand.New(rand.NewPCG(11, 12))
	si := 0
	for t := t0; t <= end; {
		v := base + uint64(rng.IntN(1<<20))
		if si < len(spikes) && t >= spikes[si] && t < spikes[si]+5*ms {
			v = spike + uint64(si)<<20
		}
		if si < len(spikes) && t >= spikes[si]+5*ms {
			si++
		}
		st.AddNVML(0, t, v, 0)
		if dense(t) {
			t += ms
		} else {
			t += 100 * ms
		}
	}
	for i, sp := range spikes {
		if v, ok := st.ValueAt(k, sp+2*ms); end-sp < int64(25*time.Second) && (!ok || v != spike+uint64(i)<<20) {
			t.Fatalf("spike %d not in the raw window", i)
		}
	}
	sr := st.series[k]
	windows := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute,
		10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	const n = 160
	check := func(name string, from, to int64) {
		cols := st.Columns(k, from, to, n)
		span := to - from
		colW := span / n
		// the widest bucket that can answer for any time in this window
		level := 0
		for i := range sr.tiers {
			if sr.tiers[i].width <= colW/2 {
				level = i + 1
			}
		}
		widest := func(t int64) int64 {
			for l := level; l <= len(sr.tiers); l++ {
				if sr.oldest(l) <= t {
					if l == 0 {
						return 0
					}
					return sr.tiers[l-1].width
				}
			}
			return day
		}
		near := make([]bool, n)
		for i, sp := range spikes {
			if sp < from || sp >= to {
				continue
			}
			c := int((sp - from) * n / span)
			if cols[c].Max < spike+uint64(i)<<20 {
				t.Fatalf("%s: spike %d (%s old) column %d max %d, want >= %d", name, i, ages[i], c, cols[c].Max, spike+uint64(i)<<20)
			}
			w := widest(sp)
			for j := range n {
				cs, ce := from+int64(j)*span/n, from+int64(j+1)*span/n
				if ce > sp-w-colW && cs < sp+5*ms+w+colW {
					near[j] = true
				}
			}
		}
		for j, c := range cols {
			if !near[j] && c.OK && c.Max >= spike {
				t.Fatalf("%s: column %d max %d, but no spike is near it", name, j, c.Max)
			}
			if ce := from + int64(j+1)*span/n; !c.OK && from >= t0+int64(time.Minute) && ce <= end {
				t.Fatalf("%s: column %d empty", name, j)
			}
		}
	}
	for _, w := range windows {
		check(fmt.Sprintf("last %s", w), end+1-int64(w), end+1)
		for i, sp := range spikes {
			if sp-int64(w)/2 >= t0 {
				check(fmt.Sprintf("%s around spike %d (%s old)", w, i, ages[i]), sp-int64(w)/2, sp+int64(w)/2)
			}
		}
	}
	// Max over the whole run sees the highest spike exactly.
	if m, ok := st.Max(k, t0, end+1); !ok || m != spike+uint64(len(spikes)-1)<<20 {
		t.Fatalf("whole-run max %d", m)
	}
}
