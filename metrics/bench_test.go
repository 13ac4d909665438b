package metrics

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// busyStore is an 8-GPU node after 30 s at 1 kHz with one agent per GPU
// (ranks 0-7) sampling at 100 Hz.
func busyStore(_ testing.TB) (*store.Store, int64) {
	st := store.New(store.DefaultOptions())
	for d := 0; d < 8; d++ {
		st.SetDevice(store.Device{Index: d, UUID: "GPU-" + string(rune('a'+d)), Name: "NVIDIA H200", Total: 150 << 30, Source: "nvml"})
		h := rankHello(1000+d, string(rune('0'+d)))
		h.Devices = []wire.AgentDevice{{Index: 0, UUID: "GPU-" + string(rune('a'+d))}}
		st.AgentHello(h)
	}
	at := t0
	for i := 0; i < 30_000; i++ {
		for d := 0; d < 8; d++ {
			st.AddNVML(d, at, uint64(i%1000)<<20, 0)
			if i%10 == 0 {
				st.AgentSample(1000+d, wire.Sample{T: at, Dev: 0, Allocated: uint64(i), Reserved: 2 * uint64(i), Peak: uint64(i)})
			}
		}
		at += ms
	}
	return st, at
}

// One scrape of the 8-GPU node: the collector and the text encoding, as
// Prometheus asks for it, the extremes over the default 30 s window, all
// of it full of samples.
func BenchmarkScrape(b *testing.B) {
	st, at := busyStore(b)
	now := func() time.Time { return time.Unix(0, at) }
	srv, err := Listen("127.0.0.1:0", st, Options{Hostname: "node1", Now: now})
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(b.Context())
	url := "http://" + srv.Addr() + "/metrics"
	get := func() {
		r, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	get()
	b.ResetTimer()
	for b.Loop() {
		get()
	}
}

// The 1 kHz ingest path (8 GPUs' samples, as the sampler's drain adds them)
// with no scrape, and with a goroutine scraping every 10 ms (100 times
// Prometheus's usual rate): a scrape takes the store's read lock per series
// only, so ingest waits for one series' extremes at most, never for a
// whole scrape.
func BenchmarkAddNVML(b *testing.B) {
	for _, scraping := range []bool{false, true} {
		name := "no scrape"
		if scraping {
			name = "scraped every 10ms"
		}
		b.Run(name, func(b *testing.B) {
			st, at := busyStore(b)
			c := NewCollector(st, Options{Hostname: "node1"})
			var stop atomic.Bool
			done := make(chan int)
			if scraping {
				go func() {
					n := 0
					for !stop.Load() {
						time.Sleep(10 * time.Millisecond)
						ch := make(chan prometheus.Metric, 256)
						go func() { c.Collect(ch); close(ch) }()
						for range ch {
						}
						n++
					}
					done <- n
				}()
			}
			b.ResetTimer()
			for b.Loop() {
				for d := 0; d < 8; d++ {
					st.AddNVML(d, at, 1<<30, 0)
				}
				at += ms
			}
			b.StopTimer()
			stop.Store(true)
			if scraping {
				b.ReportMetric(float64(<-done), "scrapes")
			}
		})
	}
}
