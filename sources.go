// The flags of a live session's sources (NVML, the agent socket, --ssh
// hosts, --metrics), the session they start, and the Go runtime settings
// that suit a monitor running beside training.

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
	"time"

	"github.com/gputop/gputop/alert"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/metrics"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/session"
	"github.com/gputop/gputop/store"
)

// sourceFlags are shared by the live commands: the TUI, record, serve, run.
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
	// alert runs a command on a forecast under alertSteps or alertWithin,
	// an OOM, an end row's ✗ verdict; killed after alertTimeout
	alert                     string
	alertSteps                float64
	alertWithin, alertTimeout time.Duration
}

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.rate, "rate", 1000, "read NVML `HZ` times a second per GPU")
	fs.Float64Var(&s.procRate, "proc-rate", 10, "refresh NVML's process lists up to `HZ` times a second while a GPU's memory moves (once a second while it does not)")
	fs.StringVar(&s.source, "source", "", "read this machine's source `S`: nvml, agent, all or none (default all; with --ssh none)")
	fs.StringVar(&s.metrics, "metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (HOST:PORT, or :PORT for every address)")
	fs.DurationVar(&s.metricsWindow, "metrics-window", metrics.DefaultWindow, "--metrics: the _max_ and _min_ series hold the extremes over the trailing `DUR` (at least the scrape interval)")
	fs.StringVar(&s.webConfig, "web.config.file", "", "--metrics: TLS and basic auth as the Prometheus exporter web configuration `PATH` sets")
	fs.StringVar(&s.alert, "alert", "", "run `CMD` (with sh -c; the event as JSON on its standard input) when a forecast falls under --alert-steps or --alert-within, an OOM happens, or an end row's verdict is ✗; a webhook: 'curl -sS -d @- URL'")
	fs.Float64Var(&s.alertSteps, "alert-steps", alert.DefaultSteps, "--alert: fire when a forecast says the OOM is at most `N` steps away (0: never by steps)")
	fs.DurationVar(&s.alertWithin, "alert-within", alert.DefaultWithin, "--alert: fire when a forecast says the OOM is at most `DUR` away (0: never by time)")
	fs.DurationVar(&s.alertTimeout, "alert-timeout", alert.DefaultTimeout, "--alert: kill a command still running after `DUR` (its process group)")
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
	if err := s.validateAlert(); err != nil {
		return err
	}
	if !(s.procRate >= 0.1 && s.procRate <= 1000) {
		return fmt.Errorf("--proc-rate %g: want 0.1 <= rate <= 1000 (refreshes a second)", s.procRate)
	}
	return nil
}

// validateAlert checks --alert's flags: the thresholds and timeout in
// range, none of them without --alert.
func (s *sourceFlags) validateAlert() error {
	if s.alert == "" {
		switch {
		case s.alertSteps != alert.DefaultSteps:
			return fmt.Errorf("--alert-steps %g: it configures --alert, which is not given", s.alertSteps)
		case s.alertWithin != alert.DefaultWithin:
			return fmt.Errorf("--alert-within %v: it configures --alert, which is not given", s.alertWithin)
		case s.alertTimeout != alert.DefaultTimeout:
			return fmt.Errorf("--alert-timeout %v: it configures --alert, which is not given", s.alertTimeout)
		}
		return nil
	}
	if strings.TrimSpace(s.alert) == "" {
		return errors.New("--alert: an empty command")
	}
	if !(s.alertSteps >= 0 && s.alertSteps <= 1e12) {
		return fmt.Errorf("--alert-steps %g: want 0 (never by steps) or a number of steps", s.alertSteps)
	}
	if s.alertWithin < 0 {
		return fmt.Errorf("--alert-within %v: want 0 (never by time) or a duration", s.alertWithin)
	}
	if s.alertTimeout < time.Second || s.alertTimeout > time.Hour {
		return fmt.Errorf("--alert-timeout %v: want 1s to 1h", s.alertTimeout)
	}
	return nil
}

// alertOptions are --alert's options (nil: no --alert).
func (s *sourceFlags) alertOptions() *alert.Options {
	if s.alert == "" {
		return nil
	}
	o := &alert.Options{Command: s.alert, Steps: s.alertSteps, Within: s.alertWithin, Timeout: s.alertTimeout}
	if o.Steps == 0 {
		o.Steps = -1 // off
	}
	if o.Within == 0 {
		o.Within = -1
	}
	return o
}

// options are the session the flags ask for, its parts writing to log.
func (s *sourceFlags) options(log *logbook.Book) session.Options {
	hosts, _ := s.hosts()
	return session.Options{
		Log:  log,
		NVML: s.source == "nvml" || s.source == "all", Rate: s.rate, ProcRate: s.procRate,
		Agents: s.source == "agent" || s.source == "all", Socket: s.socket,
		Hosts: hosts, SSH: strings.Fields(os.Getenv("GPUTOP_SSH")), RemoteCommand: s.sshGputop,
		Metrics: s.metrics, MetricsWindow: s.metricsWindow, WebConfig: s.webConfig,
		Tool: toolVersion(), Alert: s.alertOptions(),
	}
}

// start starts the session opt describes (see session.Start: all of it or
// nothing), the Go runtime set for a monitor first. An NVML without a
// driver says how to watch the agents alone.
func (s *sourceFlags) start(ctx context.Context, opt session.Options) (*session.Session, error) {
	liveRuntime()
	ses, err := session.Start(ctx, opt)
	if errors.Is(err, sampler.ErrNoDriver) && s.source == "all" {
		return nil, fmt.Errorf("%w\n(to watch only PyTorch agents on a machine without a driver: --source agent)", err)
	}
	return ses, err
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
