// Package session assembles a live gputop: the logbook, the store, the one
// ingest.Ingest into it, the recording writer as the ingest's Tap, the
// sources (NVML, the agent socket, --ssh hosts), the Prometheus endpoint and
// the end-row asker. Start starts all of it or nothing: a part that cannot
// start leaves no socket, no file and no bound port behind. Stop ends it in
// one order (stop.go). The commands (package main) turn their flags into
// Options and call it.
package session

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/agentlink"
	"github.com/gputop/gputop/alert"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/metrics"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/remote"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/status"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options say what a live session reads and writes. The zero value is a
// session of nothing: an empty store that nothing writes.
type Options struct {
	// Log is where the session's parts write for the user (nil: a new
	// logbook).
	Log *logbook.Book
	// NVML samples this machine's GPUs Rate times a second per GPU and
	// their process lists ProcRate times a second, through Lib (nil: the
	// real library, go-nvml's nvml.New()).
	NVML           bool
	Rate, ProcRate float64
	Lib            nvml.Interface
	// Agents listens on the agent socket at Socket ("": the default path,
	// agentlink.DefaultSocketPath); its RequestHeld is the ingest's
	// end-row asker.
	Agents bool
	Socket string
	// Hosts are the remote hosts to show beside this one (--ssh), host i
	// being id i+1 in the store; each is reached by the SSH command (nil:
	// plain ssh) running RemoteCommand.
	Hosts         []string
	SSH           []string
	RemoteCommand string
	// Metrics serves Prometheus's endpoint at this address ("": none), its
	// _max_ and _min_ series over MetricsWindow, with exporter-toolkit's
	// web configuration WebConfig (TLS, basic auth; "": none).
	Metrics       string
	MetricsWindow time.Duration
	WebConfig     string
	// Tool names this gputop ("gputop 0.1.0") in a recording's header and
	// to the remote hosts, which compare it with their own.
	Tool string
	// Record writes a recording of what the store keeps (nil: none).
	Record *Record
	// Alert runs a command of the user's on a forecast under a threshold,
	// an OOM, an end row's ✗ verdict (nil: none); its log is the
	// session's.
	Alert *alert.Options
	// Tap sees what the store keeps, as the recording would, from before
	// the sources start (gputop fit's watch of a child); only without
	// Record, whose writer is the Tap.
	Tap ingest.Tap
}

// Session is a live gputop running: its store, the way into it, and what
// feeds and reads it.
type Session struct {
	log     *logbook.Book
	in      *ingest.Ingest
	rec     *recording.Writer // nil: no recording
	nvml    *sampler.NVML     // nil: no NVML
	agents  *agentlink.Server // nil: no agent socket
	metrics *metrics.Server   // nil: no endpoint
	remotes []*remote.Source
	alerts  *alert.Watcher // nil: neither --alert nor an agent socket

	stopSources context.CancelFunc
	sources     sync.WaitGroup
	stopMetrics context.CancelFunc
	metricsDone chan struct{}

	stopOnce sync.Once
	ended    Ended
}

// Start starts what opt asks for: first everything that can fail (the
// recording's path checked, the metrics port bound, NVML initialised, the
// agent socket created), then the sources, then the recording's output
// opened (a FIFO waits for its reader until ctx is done). A part that
// fails undoes what came before it: no socket file, no recording, no bound
// port is left, and the error is that part's. An output that fails is an
// *OutputError. The sources run until ctx is done or Stop.
func Start(ctx context.Context, opt Options) (*Session, error) {
	s := &Session{log: opt.Log}
	if s.log == nil {
		s.log = logbook.New()
	}
	so := store.DefaultOptions()
	so.Log = s.log.Add
	s.in = ingest.New(store.New(so))
	if opt.Tap != nil && opt.Record == nil {
		s.in.SetTap(opt.Tap)
	}
	if err := s.prepare(opt); err != nil {
		s.abandon()
		return nil, err
	}
	s.run(ctx, opt)
	// --alert's commands, and the holders walk a forecast of an OOM asks
	// for (to name what holds the growing memory)
	if opt.Alert != nil || s.agents != nil {
		var ao alert.Options
		if opt.Alert != nil {
			ao = *opt.Alert
		}
		if s.agents != nil {
			ao.Ask = s.agents.RequestHeld
		}
		ao.Log = s.log.Add
		s.alerts = alert.Start(s.in.Store(), ao)
	}
	if err := s.openOutput(ctx, opt.Record); err != nil {
		s.Stop()
		return nil, &OutputError{Err: err}
	}
	return s, nil
}

// prepare sets up every part that can refuse to start, the recording
// first so that it misses nothing the sources bring.
func (s *Session) prepare(opt Options) error {
	if opt.Record != nil {
		if err := s.newRecording(opt); err != nil {
			return &OutputError{Err: err}
		}
	}
	// the metrics port before the sources: one in use stops everything
	// before it starts
	if opt.Metrics != "" {
		host, _ := os.Hostname()
		mo := metrics.Options{Hostname: host, Window: opt.MetricsWindow, WebConfig: opt.WebConfig, Log: s.log.Add}
		ms, err := metrics.Listen(opt.Metrics, s.in.Store(), mo)
		if err != nil {
			return err
		}
		s.metrics = ms
	}
	if opt.NVML {
		lib := opt.Lib
		if lib == nil {
			lib = nvml.New()
		}
		n := sampler.NewNVML(lib, s.in, sampler.NVMLOptions{Rate: opt.Rate, ProcRate: opt.ProcRate, Thread: true, Log: s.log.Add})
		if err := n.Init(); err != nil {
			return err
		}
		s.nvml = n
	}
	if opt.Agents {
		path := opt.Socket
		var err error
		if path == "" {
			path, err = agentlink.DefaultSocketPath()
		}
		if err == nil {
			// `gputop status` asks through the socket for what the store holds
			st, source := s.in.Store(), wire.StatusFromGputop
			report := func() wire.StatusReport { return status.Of(st, status.Options{Source: source}) }
			s.agents, err = agentlink.Listen(path, s.in, agentlink.Options{Log: s.log.Add, Status: report})
		}
		if err != nil {
			return err
		}
		// end rows (a key, gputop snap) ask their agents for a holders
		// walk through the socket
		s.in.SetAsker(s.agents.RequestHeld)
	}
	// each host may add its share of the store's devices, this machine
	// (when it has a source) keeping one share too
	share := remote.DeviceShare(len(opt.Hosts), opt.NVML || opt.Agents)
	for i, h := range opt.Hosts {
		s.remotes = append(s.remotes, remote.New(s.in, i+1, remote.Options{Host: h, SSH: opt.SSH, Command: opt.RemoteCommand, Tool: opt.Tool, Log: s.log.Add, Devices: share}))
	}
	return nil
}

// abandon undoes what prepare set up before it failed; nothing runs yet.
// (The agent socket is set up last: nothing after it can fail.)
func (s *Session) abandon() {
	if s.nvml != nil {
		s.nvml.Close()
	}
	if s.metrics != nil {
		s.metrics.Close()
	}
	if s.rec != nil {
		s.rec.Close() // never started: it touches no file
	}
}

// run starts each source, and the metrics endpoint, in a goroutine of its
// own.
func (s *Session) run(ctx context.Context, opt Options) {
	sctx, cancel := context.WithCancel(ctx)
	s.stopSources = cancel
	goSource := func(run func(context.Context)) {
		s.sources.Add(1)
		go func() {
			defer s.sources.Done()
			run(sctx)
		}()
	}
	for _, r := range s.remotes {
		goSource(r.Run)
	}
	if s.nvml != nil {
		goSource(func(ctx context.Context) {
			if err := s.nvml.Run(ctx); err != nil {
				s.log.Add("NVML sampling stopped: " + err.Error())
			}
			s.nvml.Close()
		})
	}
	if s.agents != nil {
		goSource(func(ctx context.Context) {
			if err := s.agents.Serve(ctx); err != nil {
				s.log.Add("agent socket: " + err.Error())
			}
		})
	}
	if s.metrics != nil {
		mctx, cancel := context.WithCancel(ctx)
		s.stopMetrics, s.metricsDone = cancel, make(chan struct{})
		s.log.Add("metrics: " + s.metrics.Serving())
		go func() {
			defer close(s.metricsDone)
			if err := s.metrics.Serve(mctx); err != nil {
				s.log.Add("metrics: " + err.Error())
			}
		}()
	}
}

// Log is the logbook the session's parts write to.
func (s *Session) Log() *logbook.Book { return s.log }

// Ingest is the one way into the session's store: for the UI's snapshots
// and row edits.
func (s *Session) Ingest() *ingest.Ingest { return s.in }

// Store is the session's store, to read.
func (s *Session) Store() *store.Store { return s.in.Store() }

// Agents is the agent socket's server (holders and dump requests, its
// path), nil when the session has none.
func (s *Session) Agents() *agentlink.Server { return s.agents }

// MetricsAddr is the address the metrics endpoint is bound to ("": none).
func (s *Session) MetricsAddr() string {
	if s.metrics == nil {
		return ""
	}
	return s.metrics.Addr()
}
