// Command tuiload runs the real TUI over a store fed the way a live
// session feeds it, without a GPU: device samples at -rate per second
// moved in every 40 ms (as the sampler drains its native thread), a
// process list 10 times a second, the achieved rate once a second. What it
// costs is the Go side of the live TUI but NVML's calls: run it in a
// terminal (tmux at 160x50) and read its CPU time and RSS from /proc, or
// set GPUTOP_CPUPROFILE=FILE for a profile of the run (GPUTOP_MEMPROFILE=FILE:
// the heap at its end).
//
//	go build -o bin/tuiload ./bench/cmd/tuiload
//	tmux new -d -x 160 -y 50 bin/tuiload -rate 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/ui"
	"github.com/gputop/gputop/wire"
)

const gib = 1 << 30

func main() {
	rate := flag.Float64("rate", 1000, "device samples per second")
	flat := flag.Bool("flat", false, "every sample the same (an idle GPU)")
	fps := flag.Int("fps", 15, "the TUI's --fps")
	flag.Parse()
	// what the live commands set (sources.go's liveRuntime)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	if path := os.Getenv("GPUTOP_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("GPUTOP_MEMPROFILE"); path != "" {
		defer func() {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	in := ingest.New(store.New(store.DefaultOptions()))
	in.Device(store.Device{Index: 0, UUID: "GPU-fake", Name: "NVIDIA H200", Total: 141 * gib, Source: "nvml"})
	go feed(ctx, in, *rate, *flat)
	m := ui.New(in, ui.Options{Now: time.Now, FPS: *fps})
	if _, err := tea.NewProgram(m, tea.WithContext(ctx), tea.WithFPS(*fps)).Run(); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// feed adds samples until ctx is done: a training job's memory rising and
// falling within each step, unless flat.
func feed(ctx context.Context, in *ingest.Ingest, rate float64, flat bool) {
	period := time.Duration(float64(time.Second) / rate)
	tk := time.NewTicker(40 * time.Millisecond)
	defer tk.Stop()
	procs := time.NewTicker(100 * time.Millisecond)
	defer procs.Stop()
	rates := time.NewTicker(time.Second)
	defer rates.Stop()
	last := time.Now().UnixNano()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rates.C:
			in.Rate(0, rate)
		case now := <-procs.C:
			in.Apply(0, wire.Procs{T: now.UnixNano(), Dev: 0, Procs: []wire.Proc{{PID: 4242, Used: 60 * gib, Name: "python"}}})
		case now := <-tk.C:
			for t := last + int64(period); t <= now.UnixNano(); t += int64(period) {
				used := uint64(60 * gib)
				if !flat {
					used += uint64((1 + math.Sin(float64(t)/1e8)) * 8 * gib)
				}
				in.NVML(0, t, used, 1<<30)
				last = t
			}
		}
	}
}
