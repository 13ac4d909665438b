// The sources a live gputop reads: NVML, the agent socket, and the Go
// runtime settings that suit a monitor running beside training.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/agentlink"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/store"
)

// sourceFlags are shared by the TUI and record.
type sourceFlags struct {
	rate, procRate float64
	source, socket string
}

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "rate", 1000, "NVML device samples per second per GPU")
	fs.Float64Var(&s.procRate, "proc-rate", 10, "NVML process-list refreshes per second")
	fs.StringVar(&s.source, "source", "all", "sources: nvml, agent or all")
	fs.StringVar(&s.socket, "socket", "", "agent socket path (default $GPUTOP_SOCKET, else $XDG_RUNTIME_DIR/gputop/gputop.sock, else /tmp/gputop-$UID/gputop.sock)")
}

func (s *sourceFlags) validate() error {
	switch s.source {
	case "nvml", "agent", "all":
	default:
		return fmt.Errorf("--source %q: want nvml, agent or all", s.source)
	}
	if s.rate <= 0 || s.rate > 10000 {
		return fmt.Errorf("--rate %g: want 0 < rate <= 10000", s.rate)
	}
	if s.procRate <= 0 || s.procRate > 1000 {
		return fmt.Errorf("--proc-rate %g: want 0 < rate <= 1000", s.procRate)
	}
	return nil
}

// start starts what the flags ask for. It returns the agent server (nil
// without agents) and a stop function that, once ctx is done, waits for the
// sources to end. Nothing runs unless every source could be set up.
func (s *sourceFlags) start(ctx context.Context, st *store.Store, log *logbook.Book) (*agentlink.Server, func(), error) {
	liveRuntime()
	var n *sampler.NVML
	if s.source == "nvml" || s.source == "all" {
		n = sampler.NewNVML(nvml.New(), st, sampler.NVMLOptions{Rate: s.rate, ProcRate: s.procRate, Thread: true, Log: log.Add})
		if err := n.Init(); err != nil {
			if errors.Is(err, sampler.ErrNoDriver) && s.source == "all" {
				return nil, nil, fmt.Errorf("%w\n(to watch only PyTorch agents on a machine without a driver: --source agent)", err)
			}
			return nil, nil, err
		}
	}
	var srv *agentlink.Server
	if s.source == "agent" || s.source == "all" {
		path := s.socket
		var err error
		if path == "" {
			path, err = agentlink.DefaultSocketPath()
		}
		if err == nil {
			srv, err = agentlink.Listen(path, st, agentlink.Options{Log: log.Add})
		}
		if err != nil {
			if n != nil {
				n.Close()
			}
			return nil, nil, err
		}
	}
	var wg sync.WaitGroup
	if n != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx); err != nil {
				log.Add("NVML sampling stopped: " + err.Error())
			}
			n.Close()
		}()
	}
	if srv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ctx); err != nil {
				log.Add("agent socket: " + err.Error())
			}
		}()
	}
	return srv, wg.Wait, nil
}

// liveRuntime suits the Go runtime to a monitor that runs for hours beside
// training. Device memory is sampled by a native thread (sampler/native),
// so the Go side only drains it, draws and serves agents: one P is enough,
// and with no idle Ps to wake, each timer and channel wake-up costs about
// half as much (H200: a Go loop waking 1000 times a second took 1.6% of a
// core on one P, 2.9% on two). A heap goal of 1.25x the live heap instead
// of 2x keeps RSS down; the garbage is well under 1 MB/s, so the extra
// collections cost little. GOMAXPROCS and GOGC in the environment win.
func liveRuntime() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
}
