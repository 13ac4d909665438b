// Package agentlink is gputop's end of the agent socket: a Unix stream socket
// over which PyTorch agents stream newline-delimited JSON frames (package
// wire) into the store, and over which `gputop snap LABEL` asks for a
// labelled snapshot. The protocol and its test vectors are described in
// testdata/protocol/README.md at the root of the repository.
//
// Every connection has its own reading goroutine and every write to a peer
// has a deadline, so one slow, stuck or misbehaving peer is closed with a
// reason while other agents and the UI carry on.
package agentlink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

// Options configure a Server.
type Options struct {
	// Now is the clock for times gputop stamps itself (snap, connection
	// lost); time.Now when nil.
	Now func() time.Time
	// Log receives one line per event worth telling the user (an agent
	// attached, detached, was closed and why). The store's Log when nil.
	Log func(string)
}

// Server accepts agent and snap connections on one socket.
type Server struct {
	path string
	ln   *net.UnixListener
	file os.FileInfo    // the socket file as created, to remove only our own
	in   *ingest.Ingest // the way into the store
	st   *store.Store   // in's store, read
	now  func() time.Time
	log  func(string)
	uid  int

	// Fields rather than constants so that tests can shorten them.
	writeTimeout      time.Duration // a write to a peer that takes longer closes it
	firstFrameTimeout time.Duration // a peer must send hello or snap within this
	pending           int           // requests queued per agent before RequestHolders refuses
	lines             *lineBudget   // memory of unfinished lines, shared by all connections

	mu      sync.Mutex
	conns   map[*client]struct{}
	agents  map[int]*client // by pid as NVML counts it (hostPID)
	closing bool
	nextID  int
	wg      sync.WaitGroup
}

// maxPathLen is the longest socket path the kernel accepts (sun_path less
// its terminating NUL).
const maxPathLen = 107

// Listen creates the socket at path (mode 0600). A socket file left behind by
// a gputop that died is replaced; one on which a gputop still answers is an
// error, as is a path that holds something other than a socket.
func Listen(path string, in *ingest.Ingest, opt Options) (*Server, error) {
	if path == "" {
		return nil, errors.New("empty socket path")
	}
	if strings.HasPrefix(path, "@") {
		return nil, fmt.Errorf("socket path %s: abstract sockets have no file permissions, so they are not used", path)
	}
	if len(path) > maxPathLen {
		// --socket, not $GPUTOP_SOCKET: every command that listens has the
		// flag, and gputop run puts its socket under $TMPDIR whatever the
		// variable says
		return nil, fmt.Errorf("socket path %s is %d bytes long; Unix sockets allow at most %d (give a shorter one with --socket)",
			path, len(path), maxPathLen)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	// Serve removes the file itself, and only if it is still ours.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*Server, error) {
		ln.Close()
		os.Remove(path)
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fail(fmt.Errorf("socket %s: %w", path, err))
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fail(fmt.Errorf("socket %s: %w", path, err))
	}
	s := &Server{
		path:              path,
		ln:                ln,
		file:              fi,
		in:                in,
		st:                in.Store(),
		now:               opt.Now,
		log:               opt.Log,
		uid:               os.Getuid(),
		writeTimeout:      2 * time.Second,
		firstFrameTimeout: 10 * time.Second,
		pending:           16,
		lines:             newLineBudget(defaultLineBudget),
		conns:             map[*client]struct{}{},
		agents:            map[int]*client{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = func(string) {}
	}
	// end rows taken from the store (a key, gputop snap) ask their agents
	// for a holders walk through this server
	s.st.SetAsker(s.RequestHeld)
	return s, nil
}

// removeStale removes a socket file nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; remove it or choose another path", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another gputop is listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until ctx is done, then closes every connection,
// waits for their goroutines and removes the socket file. Agents still
// connected at that point are not marked ended: gputop stopped, they did not.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	defer s.shutdown()
	backoff := 5 * time.Millisecond
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// e.g. out of file descriptors: say so once per burst, and
			// retry rather than give up on every agent.
			if backoff == 5*time.Millisecond {
				s.log(fmt.Sprintf("agent socket: accept: %v", err))
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.wg.Add(1)
		go s.handle(nc)
	}
}

func (s *Server) shutdown() {
	s.ln.Close()
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.shut("gputop is stopping")
	}
	s.mu.Unlock()
	s.wg.Wait()
	// Another gputop may have replaced the file meanwhile (after someone
	// deleted ours); its socket is not ours to remove.
	if fi, err := os.Stat(s.path); err == nil && os.SameFile(fi, s.file) {
		os.Remove(s.path)
	}
}
