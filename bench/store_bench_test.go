package bench

import (
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

var (
	soakGPUs  = flag.Int("soak.gpus", 1, "GPUs for BenchmarkSoak")
	soakHours = flag.Float64("soak.hours", 24, "simulated hours for BenchmarkSoak")
)

// BenchmarkAddNVML is the 1 kHz hot path: one device sample (used and
// reserved, two series) per op, on rings that are already full.
func BenchmarkAddNVML(b *testing.B) {
	for _, gpus := range []int{1, 8} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			st := store.New(store.DefaultOptions())
			in := ingest.New(st) // the sources' way in
			srcs := make([]*Source, gpus)
			for g := range srcs {
				srcs[g] = &Source{GPU: g, Period: time.Millisecond, SpikeEvery: time.Minute, rng: uint64(g) + 1}
			}
			// fill every raw ring and the finer tiers first, so the loop
			// measures the steady state, not ring growth
			var e int64
			for ; e < int64(2*time.Minute); e += int64(time.Millisecond) {
				for _, s := range srcs {
					u, r := s.Sample(e)
					in.NVML(s.GPU, e, u, r)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s := srcs[i%gpus]
				u, r := s.Sample(e)
				in.NVML(s.GPU, e, u, r)
				i++
				if i%gpus == 0 {
					e += int64(time.Millisecond)
				}
			}
		})
	}
}

var (
	dayOnce  sync.Once
	dayStore SoakResult
)

// day is one GPU fast-forwarded through 24 h at 1 kHz (86.4 M samples),
// shared by the query benchmarks.
func day(b *testing.B) SoakResult {
	dayOnce.Do(func() {
		b.Logf("filling 24 h at 1 kHz on one GPU...")
		dayStore = Soak(SoakConfig{GPUs: 1, Duration: 24 * time.Hour, RateHz: 1000, SpikeEvery: time.Hour,
			Options: store.DefaultOptions()}, nil)
		b.Logf("filled in %s", dayStore.Wall.Round(time.Millisecond))
	})
	return dayStore
}

// BenchmarkColumns is one chart query: 160 columns of the NVML used series
// over a window ending now, after 24 h at 1 kHz.
func BenchmarkColumns(b *testing.B) {
	r := day(b)
	k := store.Key{Dev: 0, Metric: store.NVMLUsed}
	for _, w := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		b.Run("window="+w.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := r.Store.Columns(k, r.End+1-int64(w), r.End+1, 160)
				if !c[159].OK {
					b.Fatal("empty last column")
				}
			}
		})
	}
}

// BenchmarkMax is the whole-run peak and a snapshot's peak since the
// previous one (60 s, exact from raw samples).
func BenchmarkMax(b *testing.B) {
	r := day(b)
	k := store.Key{Dev: 0, Metric: store.NVMLUsed}
	for _, w := range []time.Duration{time.Minute, 24 * time.Hour} {
		b.Run("window="+w.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.Store.Max(k, r.End+1-int64(w), r.End+1); !ok {
					b.Fatal("no max")
				}
			}
		})
	}
}

// BenchmarkSoak fast-forwards -soak.gpus synthetic GPUs (default 1) through
// -soak.hours (default 24) of 1 kHz samples and reports the heap in use at
// checkpoints (above the heap before it started, so fixtures of other
// benchmarks in the same process do not count) and the CPU cost per sample.
// Run alone:
//
//	go test -run XXX -bench Soak -benchtime 1x ./bench -args -soak.gpus 8
func BenchmarkSoak(b *testing.B) {
	cps := []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	dur := time.Duration(*soakHours * float64(time.Hour))
	var keep []time.Duration
	for _, c := range cps {
		if c <= dur {
			keep = append(keep, c)
		}
	}
	for b.Loop() {
		r := Soak(SoakConfig{GPUs: *soakGPUs, Duration: dur, RateHz: 1000, SpikeEvery: time.Hour,
			Options: store.DefaultOptions(), Checkpoints: keep}, func(c Checkpoint) {
			b.Logf("%-8s %12d samples %9s wall %9s cpu  heap in use %7.1f MiB", c.At, c.Samples,
				c.Wall.Round(time.Millisecond), c.CPU.Round(time.Millisecond), mib(c.HeapInuse))
		})
		b.ReportMetric(float64(r.CPU.Nanoseconds())/float64(r.Samples), "cpu-ns/sample")
		b.ReportMetric(r.Wall.Seconds(), "wall-s")
		b.ReportMetric(r.CPU.Seconds(), "cpu-s")
		for _, c := range r.Checkpoints[1:] {
			b.ReportMetric(mib(c.HeapInuse-r.Checkpoints[0].HeapInuse), "heap-MiB@"+c.At.String())
		}
	}
}

func mib(x uint64) float64 { return float64(x) / (1 << 20) }

// TestSoakMemoryBounded is the cheap form of the soak that runs with every
// `go test`: two GPUs at 4 Hz for 30 simulated hours fill every raw ring
// and the 100 ms, 1 s and 10 s tiers. The heap must stop growing once they
// are full and stay under the bound the options imply, and every spike
// must stay visible at every zoom.
func TestSoakMemoryBounded(t *testing.T) {
	opt := store.DefaultOptions()
	r := Soak(SoakConfig{GPUs: 2, Duration: 30 * time.Hour, RateHz: 4, SpikeEvery: 30 * time.Minute, Options: opt,
		Checkpoints: []time.Duration{time.Hour, 24*time.Hour + 10*time.Minute, 30 * time.Hour}}, nil)
	base, full, end := r.Checkpoints[0], r.Checkpoints[2], r.Checkpoints[3]
	bound := 4 * SeriesBound(opt) // 2 GPUs x (used, reserved)
	grew := int64(end.HeapAlloc) - int64(base.HeapAlloc)
	if grew > int64(bound) {
		t.Fatalf("heap grew %d bytes, more than the %d the options allow", grew, bound)
	}
	// From 24 h 10 min to 30 h only the 1 min tier still grows: 360 more
	// buckets per series at most (and its ring grows in steps).
	if d := int64(end.HeapAlloc) - int64(full.HeapAlloc); d > 4*2048*32+256<<10 {
		t.Fatalf("heap grew %d bytes after the rings were full", d)
	}
	for _, w := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		total, seen, stray, gone := r.SpikeCheck(1, w, 160)
		if total < 50 || seen != total || stray != 0 || gone != 0 {
			t.Fatalf("window %s: %d of %d spikes seen, %d stray columns, %d gone", w, seen, total, stray, gone)
		}
	}
}
