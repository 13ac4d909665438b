// Command soak fast-forwards synthetic GPUs through hours of NVML samples
// into gputop's store and prints the heap in use at checkpoints, the cost
// per sample, and whether 5 ms spikes stay visible at every zoom.
//
//	go run ./bench/cmd/soak -gpus 8 -hours 24
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gputop/gputop/bench"
	"github.com/gputop/gputop/store"
)

func main() {
	gpus := flag.Int("gpus", 8, "synthetic GPUs")
	hours := flag.Float64("hours", 24, "simulated hours")
	rate := flag.Int("rate", 1000, "samples per second per GPU")
	spikes := flag.Duration("spike-every", time.Hour, "one 5 ms spike per GPU this often (0: none)")
	flag.Parse()
	if *gpus < 1 || *hours <= 0 || *rate < 1 {
		fmt.Fprintln(os.Stderr, "soak: -gpus, -hours and -rate must be positive")
		os.Exit(2)
	}
	dur := time.Duration(*hours * float64(time.Hour))
	var cps []time.Duration
	for _, c := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour,
		12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 96 * time.Hour, 7 * 24 * time.Hour, 8 * 24 * time.Hour} {
		if c <= dur {
			cps = append(cps, c)
		}
	}
	if len(cps) == 0 || cps[len(cps)-1] != dur {
		cps = append(cps, dur)
	}
	opt := store.DefaultOptions()
	bound := bench.SeriesBound(opt) * uint64(*gpus) * 2
	fmt.Printf("%d GPU(s) x 2 series at %d Hz for %s; series bound %.2f MiB each, %.1f MiB for all\n",
		*gpus, *rate, dur, mib(bench.SeriesBound(opt)), mib(bound))
	fmt.Printf("%-10s %14s %10s %10s %14s %14s\n", "simulated", "samples", "wall", "cpu", "heap in use", "heap alloc")
	r := bench.Soak(bench.SoakConfig{GPUs: *gpus, Duration: dur, RateHz: *rate, SpikeEvery: *spikes,
		Options: opt, Checkpoints: cps}, func(c bench.Checkpoint) {
		fmt.Printf("%-10s %14d %10s %10s %10.1f MiB %10.1f MiB\n", c.At, c.Samples, c.Wall.Round(time.Millisecond),
			c.CPU.Round(time.Millisecond), mib(c.HeapInuse), mib(c.HeapAlloc))
	})
	fmt.Printf("total %d device samples in %s wall, %s CPU: %.0f ns CPU per device sample (used + reserved)\n",
		r.Samples, r.Wall.Round(time.Millisecond), r.CPU.Round(time.Millisecond), float64(r.CPU.Nanoseconds())/float64(r.Samples))
	if *spikes > 0 {
		fmt.Printf("spikes of GPU 0 visible as the max of their own column, 160 columns, window centred on each spike:\n")
		for _, w := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
			if time.Duration(r.End+1-r.Start) < w {
				continue
			}
			total, seen, stray, gone := r.SpikeCheck(0, w, 160)
			fmt.Printf("  %-8s %d/%d seen, %d stray columns", w, seen, total, stray)
			if gone > 0 {
				fmt.Printf(" (%d more are older than the longest tier keeps)", gone)
			}
			fmt.Println()
		}
	}
}

func mib(x uint64) float64 { return float64(x) / (1 << 20) }
