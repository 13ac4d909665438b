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
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/agentlink"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/metrics"
	"github.com/gputop/gputop/remote"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/store"
)

// sourceFlags are shared by the TUI and record.
type sourceFlags struct {
	rate, procRate float64
	source, socket string
	// ssh lists the remote hosts (--ssh node1,node2), sshGputop the gputop
	// they run
	ssh, sshGputop string
	metrics        string // --metrics ADDR: serve Prometheus metrics there
	// metricsWindow is the trailing window of the _max_/_min_ series,
	// webConfig exporter-toolkit's web configuration (TLS, basic auth)
	metricsWindow time.Duration
	webConfig     string
}

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "rate", 1000, "read NVML `HZ` times a second per GPU")
	fs.Float64Var(&s.procRate, "proc-rate", 10, "refresh NVML's process lists `HZ` times a second")
	fs.StringVar(&s.source, "source", "", "read this machine's source `S`: nvml, agent, all or none (default all; with --ssh none)")
	fs.StringVar(&s.metrics, "metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (HOST:PORT, or :PORT for every address)")
	fs.DurationVar(&s.metricsWindow, "metrics-window", metrics.DefaultWindow, "--metrics: the _max_ and _min_ series hold the extremes over the trailing `DUR` (at least the scrape interval)")
	fs.StringVar(&s.webConfig, "web.config.file", "", "--metrics: TLS and basic auth as the Prometheus exporter web configuration `PATH` sets")
	fs.StringVar(&s.socket, "socket", "", "agent socket `PATH` (default $GPUTOP_SOCKET, else $XDG_RUNTIME_DIR/gputop/gputop.sock, else /tmp/gputop-$UID/gputop.sock)")
}

// registerSSH adds the flags of remote hosts (the TUI and record; serve
// serves its own machine only).
func (s *sourceFlags) registerSSH(fs *flag.FlagSet) {
	fs.StringVar(&s.ssh, "ssh", "", "`HOSTS` to show beside (or instead of) this one, comma-separated: each runs gputop serve --stdio over ssh ($GPUTOP_SSH: the ssh command and its options)")
	fs.StringVar(&s.sshGputop, "ssh-gputop", "gputop", "run gputop on the remote hosts as `CMD`, as their shell runs it")
}

func (s *sourceFlags) validate() error {
	hosts, err := s.hosts()
	if err != nil {
		return err
	}
	if s.source == "" {
		s.source = "all"
		if len(hosts) > 0 {
			s.source = "none" // a login node: only the hosts
		}
	}
	switch s.source {
	case "nvml", "agent", "all", "none":
	default:
		return fmt.Errorf("--source %q: want nvml, agent, all or none", s.source)
	}
	// written so that NaN fails too; the lower bounds keep each period
	// within a time.Duration (a tiny rate overflowed into a busy loop) and
	// the header's whole rate_hz above 0
	if !(s.rate >= 1 && s.rate <= 10000) {
		return fmt.Errorf("--rate %g: want 1 <= rate <= 10000 (samples a second)", s.rate)
	}
	if s.metrics != "" {
		if err := metrics.CheckAddr(s.metrics); err != nil {
			return err
		}
	} else if s.webConfig != "" {
		return fmt.Errorf("--web.config.file %s: it configures --metrics, which is not given", s.webConfig)
	} else if s.metricsWindow != metrics.DefaultWindow {
		return fmt.Errorf("--metrics-window %v: it configures --metrics, which is not given", s.metricsWindow)
	}
	if s.metricsWindow < metrics.MinWindow || s.metricsWindow > metrics.MaxWindow {
		return fmt.Errorf("--metrics-window %v: want 1s to 1h", s.metricsWindow)
	}
	if !(s.procRate >= 0.1 && s.procRate <= 1000) {
		return fmt.Errorf("--proc-rate %g: want 0.1 <= rate <= 1000 (refreshes a second)", s.procRate)
	}
	return nil
}

// start starts what the flags ask for. It returns the agent server (nil
// without agents) and a stop function that, once ctx is done, waits for the
// sources to end. Nothing runs unless every source could be set up.
func (s *sourceFlags) start(ctx context.Context, in *ingest.Ingest, log *logbook.Book) (*agentlink.Server, func(), error) {
	st := in.Store()
	liveRuntime()
	// the metrics port first: one in use stops everything before it starts
	var ms *metrics.Server
	if s.metrics != "" {
		host, _ := os.Hostname()
		var err error
		opt := metrics.Options{Hostname: host, Window: s.metricsWindow, WebConfig: s.webConfig, Log: log.Add}
		if ms, err = metrics.Listen(s.metrics, st, opt); err != nil {
			return nil, nil, err
		}
	}
	closeMetrics := func() {
		if ms != nil {
			ms.Close()
		}
	}
	var n *sampler.NVML
	if s.source == "nvml" || s.source == "all" {
		n = sampler.NewNVML(nvml.New(), in, sampler.NVMLOptions{Rate: s.rate, ProcRate: s.procRate, Thread: true, Log: log.Add})
		if err := n.Init(); err != nil {
			closeMetrics()
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
			srv, err = agentlink.Listen(path, in, agentlink.Options{Log: log.Add})
		}
		if err != nil {
			if n != nil {
				n.Close()
			}
			closeMetrics()
			return nil, nil, err
		}
	}
	var wg sync.WaitGroup
	hosts, _ := s.hosts()
	for _, src := range s.remotes(in, hosts, log) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src.Run(ctx)
		}()
	}
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
	if ms != nil {
		log.Add("metrics: " + ms.Serving())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms.Serve(ctx); err != nil {
				log.Add("metrics: " + err.Error())
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

// hosts are --ssh's hosts, each named once.
func (s *sourceFlags) hosts() ([]string, error) {
	if s.ssh == "" {
		return nil, nil
	}
	var hosts []string
	seen := map[string]bool{}
	for _, h := range strings.Split(s.ssh, ",") {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return nil, fmt.Errorf("--ssh %q: an empty host name", s.ssh)
		case strings.HasPrefix(h, "-"):
			return nil, fmt.Errorf("--ssh: %q is not a host name", h)
		case seen[h]:
			continue
		}
		seen[h] = true
		hosts = append(hosts, h)
	}
	if len(hosts) > store.MaxHosts {
		return nil, fmt.Errorf("--ssh: %d hosts, at most %d", len(hosts), store.MaxHosts)
	}
	return hosts, nil
}

// remotes makes the sources of the hosts: host i is id i+1 in the store.
// Each host may add its share of the store's devices, this machine (when
// it has a source) keeping one share too.
func (s *sourceFlags) remotes(in *ingest.Ingest, hosts []string, log *logbook.Book) []*remote.Source {
	sshCmd := strings.Fields(os.Getenv("GPUTOP_SSH"))
	share := remote.DeviceShare(len(hosts), s.source != "none")
	var out []*remote.Source
	for i, h := range hosts {
		out = append(out, remote.New(in, i+1, remote.Options{Host: h, SSH: sshCmd, Command: s.sshGputop, Tool: toolVersion(), Log: log.Add, Devices: share}))
	}
	return out
}
