// Package bench measures the store under gputop's load: a synthetic NVML
// source that fast-forwards through hours of 1 kHz samples on several GPUs,
// with heap checkpoints that show memory stays bounded, and spikes that must
// stay visible in the chart's columns. The benchmarks are in
// store_bench_test.go; cmd/soak prints the same run as a table.
package bench

import (
	"runtime"
	"syscall"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

// Source is a deterministic synthetic GPU: a training-like sawtooth of used
// memory with noise, a steady reserved figure, and a 5 ms spike of 16 GiB
// every SpikeEvery (offset per GPU so the GPUs differ). A spike sample is
// always above SpikeLevel and no other sample is.
type Source struct {
	GPU        int
	Period     time.Duration // time between samples (1 ms at 1 kHz)
	SpikeEvery time.Duration
	rng        uint64
}

const (
	baseUsed   = 20 << 30
	sawHeight  = 8 << 30
	sawPeriod  = int64(60 * time.Second)
	spikeBytes = 16 << 30
	spikeLen   = int64(5 * time.Millisecond)
	// SpikeLevel separates spike samples from all others.
	SpikeLevel = baseUsed + spikeBytes
)

// spikeOffset places GPU g's spikes inside each SpikeEvery interval.
func (s *Source) spikeOffset() int64 {
	return int64(s.SpikeEvery/3) + int64(s.GPU)*int64(7*time.Second)
}

// IsSpike tells whether elapsed (time since the run's start) falls in a spike.
func (s *Source) IsSpike(elapsed int64) bool {
	if s.SpikeEvery <= 0 {
		return false
	}
	in := (elapsed - s.spikeOffset()) % int64(s.SpikeEvery)
	return elapsed >= s.spikeOffset() && in >= 0 && in < spikeLen
}

// Spikes lists the start (elapsed time) of every spike in [from, to).
func (s *Source) Spikes(from, to int64) []int64 {
	if s.SpikeEvery <= 0 {
		return nil
	}
	var out []int64
	for t := s.spikeOffset(); t < to; t += int64(s.SpikeEvery) {
		if t >= from {
			out = append(out, t)
		}
	}
	return out
}

// Sample returns used and reserved bytes at elapsed ns into the run.
func (s *Source) Sample(elapsed int64) (used, reserved uint64) {
	// xorshift: cheap noise, so that buckets really differ
	s.rng ^= s.rng << 13
	s.rng ^= s.rng >> 7
	s.rng ^= s.rng << 17
	used = baseUsed + uint64(elapsed%sawPeriod)*sawHeight/uint64(sawPeriod) + s.rng%(64<<20)
	if s.IsSpike(elapsed) {
		used += spikeBytes
	}
	return used, baseUsed + sawHeight + 2<<30
}

// SoakConfig describes one fast-forward run.
type SoakConfig struct {
	GPUs        int
	Duration    time.Duration // simulated time
	RateHz      int           // samples per second per GPU
	SpikeEvery  time.Duration // 0: no spikes
	Options     store.Options
	Checkpoints []time.Duration // simulated times at which to measure the heap
}

// Checkpoint is the state of a run at one simulated time.
type Checkpoint struct {
	At        time.Duration // simulated time
	Samples   uint64        // device samples ingested so far, all GPUs
	Wall      time.Duration // real time spent so far
	CPU       time.Duration // process CPU time (user + system) spent so far
	HeapInuse uint64        // runtime.MemStats.HeapInuse after a GC
	HeapAlloc uint64        // runtime.MemStats.HeapAlloc after a GC
}

// SoakResult is what a run measured.
type SoakResult struct {
	Checkpoints []Checkpoint
	Wall        time.Duration
	CPU         time.Duration // process CPU time, GC included: on a shared machine it is steadier than Wall
	Samples     uint64
	Store       *store.Store
	Start, End  int64 // first and last sample time
	Sources     []*Source
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heap collects garbage and reads the heap, so the figure is live data.
func heap() (inuse, alloc uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.HeapAlloc
}

// Soak feeds cfg.GPUs synthetic sources into a new store, sample by sample
// in time order as the NVML goroutines would, and measures the heap at each
// checkpoint. progress, when set, sees each checkpoint as it is taken.
func Soak(cfg SoakConfig, progress func(Checkpoint)) SoakResult {
	period := int64(time.Second) / int64(cfg.RateHz)
	st := store.New(cfg.Options)
	in := ingest.New(st) // the sources' way in
	srcs := make([]*Source, cfg.GPUs)
	for g := range srcs {
		srcs[g] = &Source{GPU: g, Period: time.Duration(period), SpikeEvery: cfg.SpikeEvery, rng: uint64(g)*0x9E3779B97F4A7C15 + 1}
		in.Device(store.Device{Index: g, UUID: "GPU-synthetic-" + string(rune('a'+g)), Name: "synthetic", Total: 141 << 30, Source: "nvml"})
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	res := SoakResult{Store: st, Start: t0, Sources: srcs}
	cps := append([]time.Duration(nil), cfg.Checkpoints...)
	inuse, alloc := heap()
	cp := Checkpoint{HeapInuse: inuse, HeapAlloc: alloc}
	res.Checkpoints = append(res.Checkpoints, cp)
	if progress != nil {
		progress(cp)
	}
	began, cpu0 := time.Now(), cpuTime()
	end := int64(cfg.Duration)
	var n uint64
	for e := int64(0); e < end; e += period {
		for _, s := range srcs {
			used, reserved := s.Sample(e)
			in.NVML(s.GPU, t0+e, used, reserved)
		}
		n += uint64(len(srcs))
		if len(cps) > 0 && e+period >= int64(cps[0]) {
			wall, cpu := time.Since(began), cpuTime()-cpu0
			inuse, alloc := heap()
			cp := Checkpoint{At: cps[0], Samples: n, Wall: wall, CPU: cpu, HeapInuse: inuse, HeapAlloc: alloc}
			res.Checkpoints = append(res.Checkpoints, cp)
			if progress != nil {
				progress(cp)
			}
			cps = cps[1:]
		}
	}
	res.Wall, res.CPU = time.Since(began), cpuTime()-cpu0
	res.Samples = n
	res.End = t0 + (end-1)/period*period
	return res
}

// SpikeCheck draws, for every spike of one GPU, a window of the given width
// centred on it (shifted to stay inside the run) in cols columns, and counts
// the spikes and how many show above SpikeLevel as the Max of their own
// column. stray counts columns above SpikeLevel more than one column plus
// one bucket (the widest tier) away from any spike: a smeared chart. gone
// counts spikes older than the longest tier keeps, which are not checked.
func (r SoakResult) SpikeCheck(gpu int, width time.Duration, cols int) (total, seen, stray, gone int) {
	src := r.Sources[gpu]
	k := store.Key{Dev: gpu, Metric: store.NVMLUsed}
	w := int64(width)
	spikes := src.Spikes(0, r.End-r.Start+1)
	for _, sp := range spikes {
		t := r.Start + sp
		if _, ok := r.Store.ValueAt(k, t); !ok {
			gone++
			continue
		}
		from := max(r.Start, min(t-w/2, r.End+1-w))
		to := from + w
		c := r.Store.Columns(k, from, to, cols)
		total++
		i := int((t - from) * int64(cols) / w)
		if c[i].OK && c[i].Max >= SpikeLevel {
			seen++
		}
		colW := w / int64(cols)
		for j, col := range c {
			if !col.OK || col.Max < SpikeLevel {
				continue
			}
			cs, ce := from+int64(j)*w/int64(cols), from+int64(j+1)*w/int64(cols)
			near := false
			for _, o := range spikes {
				ot := r.Start + o
				near = near || (ce > ot-colW-int64(time.Minute) && cs < ot+spikeLen+colW+int64(time.Minute))
			}
			if !near {
				stray++
			}
		}
	}
	return total, seen, stray, gone
}

// SeriesBound is the most bytes one series can hold with these options:
// a full raw ring and every tier full.
func SeriesBound(o store.Options) uint64 {
	const pointBytes, bucketBytes = 16, 32
	b := uint64(o.RawCapacity) * pointBytes
	for _, t := range o.Tiers {
		b += uint64(t.Buckets) * bucketBytes
	}
	return b
}
