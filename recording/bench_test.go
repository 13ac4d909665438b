package recording

import (
	"bytes"
	"math/rand"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gputop/gputop/store"
)

// benchNVML feeds b.N samples of steady memory at 1 kHz (times from step)
// and reports the cost per call and the file bytes per sample.
func benchNVML(b *testing.B, step func(i int) int64) {
	path := tempPath(b, "bench.gputop")
	w, err := Create(path, header())
	if err != nil {
		b.Fatal(err)
	}
	hdr := w.Stats().Bytes
	b.ReportAllocs()
	b.ResetTimer()
	t := base
	for i := range b.N {
		t += step(i)
		w.NVML(0, t, 40<<30, 537_919_488)
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	// The loop calls NVML far faster than 1 kHz, so the writer may fall
	// behind and drop batches; size per sample is measured on what it wrote.
	s := w.Stats()
	fi, err := os.Stat(path)
	if err != nil || uint64(fi.Size()) != s.Bytes {
		b.Fatalf("file size %v, writer counted %d bytes (%v)", fi.Size(), s.Bytes, err)
	}
	if s.Samples > 0 {
		b.ReportMetric(float64(s.Bytes-hdr)/float64(s.Samples), "bytes/sample")
	}
	b.ReportMetric(float64(s.DroppedSamples)/float64(b.N), "dropped/sample")
}

// Samples exactly 1 ms apart.
func BenchmarkWriterNVML(b *testing.B) {
	benchNVML(b, func(int) int64 { return ms })
}

// Samples 1 ms apart ± up to 50 µs, as a sampler stamping time.Now() sees.
func BenchmarkWriterNVMLJitter(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	jit := make([]int64, 4096)
	for i := range jit {
		jit[i] = ms + rng.Int63n(100_000) - 50_000
	}
	benchNVML(b, func(i int) int64 { return jit[i%len(jit)] })
}

// Eight GPUs' samplers calling at once.
func BenchmarkWriterNVML8GPUs(b *testing.B) {
	w, err := Create(tempPath(b, "bench8.gputop"), header())
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4) // 8 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		dev := int(next.Add(1)-1) % 8
		t := base
		for pb.Next() {
			t += ms
			w.NVML(dev, t, 40<<30, 537_919_488)
		}
	})
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// Loading: a minute of one GPU at 1 kHz with an agent at 100 Hz.
func BenchmarkLoad(b *testing.B) {
	path := tempPath(b, "load.gputop")
	record(b, path, 60_000)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	var samples int64
	for range b.N {
		info, err := LoadReader("bench", bytes.NewReader(data), store.New(replayOptions()))
		if err != nil {
			b.Fatal(err)
		}
		samples += info.Samples
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(samples), "ns/nvml-sample")
}
