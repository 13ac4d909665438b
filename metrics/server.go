package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputop/gputop/store"
)

// Server serves /metrics over HTTP.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (host:port, ":9400" for every address) now, so a port
// in use is an error before anything else starts, naming the address.
func Listen(addr string, st *store.Store, opt Options) (*Server, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: cannot listen: %w", addr, err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(st, opt)); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4, Timeout: 10 * time.Second,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "gputop: Prometheus metrics at /metrics")
	})
	return &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// CheckAddr says what is wrong with a --metrics address, naming it.
func CheckAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--metrics %q: want HOST:PORT or :PORT (e.g. 127.0.0.1:9400 or :9400)", addr)
	}
	return nil
}

// Addr is the address bound (the port chosen when addr gave port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve answers scrapes until ctx is done.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.srv.Shutdown(sctx)
			cancel()
		case <-done:
		}
	}()
	err := s.srv.Serve(s.ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops a server that never served.
func (s *Server) Close() error { return s.ln.Close() }
