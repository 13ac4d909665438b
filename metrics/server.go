package metrics

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gputop/gputop/store"
)

// The endpoint's bounds: anyone who can reach the port can open
// connections, so each is held only as long as a scrape needs.
const (
	// MaxConns is how many connections are kept open at once; one more
	// closes the one idle longest (conncap.go).
	MaxConns = 64
	// ReadHeaderTimeout: a new connection (or a TLS handshake) must have
	// sent a request's headers within it.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request.
	ReadTimeout = 10 * time.Second
	// WriteTimeout bounds answering one; a scrape that takes longer than
	// scrapeTimeout gets a 503 before it.
	WriteTimeout  = 30 * time.Second
	scrapeTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection with no request: longer
	// than a 15 s scrape interval, so such a scraper keeps its connection.
	IdleTimeout = 30 * time.Second
	// maxStreams bounds the scrapes one HTTP/2 connection (TLS) may have
	// in flight.
	maxStreams = 4
)

// Server serves /metrics over HTTP, or HTTPS and basic auth as a web
// configuration file says.
type Server struct {
	cap       *connCap
	srv       *http.Server
	webConfig string
	log       *serverLog
}

// Listen binds addr (host:port, ":9400" for every address) now, so a port
// in use, or a web configuration that does not load, is an error before
// anything else starts, naming the address or the file.
func Listen(addr string, st *store.Store, opt Options) (*Server, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	if opt.WebConfig != "" {
		// the file is read again at each request and handshake (so a
		// renewed certificate is taken); this says now what is wrong
		if err := web.Validate(opt.WebConfig); err != nil {
			return nil, fmt.Errorf("--web.config.file %s: %w", opt.WebConfig, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: cannot listen: %w", addr, err)
	}
	// not pedantic: checking every series' labels against its descriptor
	// cost a tenth of a scrape; the tests' pedantic registry checks them
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(st, opt)); err != nil {
		ln.Close()
		return nil, err
	}
	// No MaxRequestsInFlight: a scrape must not fail because others are
	// scraping (two Prometheus servers of a pair, or many); the collector
	// keeps nothing between scrapes, and MaxConns bounds how many run.
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, Timeout: scrapeTimeout,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "gputop: Prometheus metrics at /metrics")
	})
	say := opt.Log
	if say == nil {
		say = func(string) {}
	}
	sl := &serverLog{log: say, every: logEvery}
	c := newConnCap(ln, MaxConns)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ConnState:         c.track,
		ErrorLog:          log.New(sl, "", 0),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
	}
	return &Server{cap: c, srv: srv, webConfig: opt.WebConfig, log: sl}, nil
}

// CheckAddr says what is wrong with a --metrics address, naming it.
func CheckAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--metrics %q: want HOST:PORT or :PORT (e.g. 127.0.0.1:9400 or :9400)", addr)
	}
	return nil
}

// Addr is the address bound (the port chosen when addr gave port 0).
func (s *Server) Addr() string { return s.cap.Addr().String() }

// Serving says where and how it serves, for the log.
func (s *Server) Serving() string {
	if s.webConfig == "" {
		return "serving http://" + s.Addr() + "/metrics"
	}
	return "serving " + s.Addr() + "/metrics with TLS and basic auth as " + s.webConfig + " sets"
}

// Serve answers scrapes until ctx is done.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(logEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				s.srv.Shutdown(sctx)
				cancel()
				return
			case <-done:
				return
			case now := <-tick.C:
				s.report()
				s.log.flush(now)
			}
		}
	}()
	wc := s.webConfig
	err := web.Serve(s.cap, s.srv, &web.FlagConfig{WebConfigFile: &wc}, slog.New(slogHandler{s.log}))
	close(done)
	s.report()
	s.log.flush(time.Now().Add(logEvery))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// report logs the connections the cap closed since the last report.
func (s *Server) report() {
	ev, ref := s.cap.evicted.Swap(0), s.cap.refused.Swap(0)
	if ev+ref == 0 {
		return
	}
	s.log.log(fmt.Sprintf("metrics: %d connections past the cap of %d: %d idle ones closed to make room, %d new ones refused (all busy)",
		ev+ref, MaxConns, ev, ref))
}

// Close stops a server that never served.
func (s *Server) Close() error { return s.cap.Close() }
