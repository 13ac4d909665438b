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
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options configure a Server.
type Options struct {
	// Now is the clock for times gputop stamps itself (snap, connection
	// lost); time.Now when nil.
	Now func() time.Time
	// Log receives one line per event worth telling the user (an agent
	// attached, detached, was closed and why). The store's Log when nil.
	Log func(string)
	// MaxConns bounds the connections held at once (agents and snap
	// clients); one more is answered with a reply saying so and closed.
	// DefaultMaxConns when 0.
	MaxConns int
	// Status makes the status report a status frame asks for (`gputop
	// status`), from the store: the session's (package status), which
	// this package may not import; nil: such a frame is answered with an
	// error.
	Status func() wire.StatusReport
}

// DefaultMaxConns is how many connections a server holds at once: far more
// than the training processes of one node, few enough that their
// goroutines and buffers stay a few tens of MiB.
const DefaultMaxConns = 1024

// Server accepts agent, snap and status connections on one socket.
type Server struct {
	path string
	ln   *net.UnixListener
	file os.FileInfo    // the socket file as created, to remove only our own
	in   *ingest.Ingest // the way into the store
	st   *store.Store   // in's store, read
	now  func() time.Time
	log  func(string)
	uid  int
	// makes the answer to a status frame (Options.Status); statusMu makes
	// one answer at a time, so that many `gputop status` at once hold one
	// report's memory, not one each
	statusOf func() wire.StatusReport
	statusMu sync.Mutex

	// Fields rather than constants so that tests can shorten them.
	writeTimeout      time.Duration // a write to a peer that takes longer closes it
	firstFrameTimeout time.Duration // a peer must send hello, snap or status within this
	pending           int           // requests queued per agent before RequestHolders refuses
	lines             *lineBudget   // memory of unfinished lines, shared by all connections
	maxConns          int           // connections held at once (Options.MaxConns)

	open     atomic.Int64  // connections held: accepted and not yet ended
	refused  atomic.Uint64 // connections refused for maxConns
	loggedAt time.Time     // when a refusal was last logged (Serve's goroutine only)

	mu      sync.Mutex
	conns   map[*client]struct{}
	agents  map[int]*client // by pid key (agentKey)
	closing bool
	nextID  int
	nextNS  int // the last namespace-local connection's number (agentKey)
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
	ln, err := listenAt(path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		ln.Close()
		os.Remove(path)
		return nil, err
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
		statusOf:          opt.Status,
		writeTimeout:      2 * time.Second,
		firstFrameTimeout: 10 * time.Second,
		pending:           16,
		lines:             newLineBudget(defaultLineBudget),
		maxConns:          opt.MaxConns,
		conns:             map[*client]struct{}{},
		agents:            map[int]*client{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = func(string) {}
	}
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConns
	}
	return s, nil
}

// listenAt listens on a socket that appears at path only once it listens,
// with mode 0600. Bound at path directly, the file would exist before
// listen(2) and before the chmod: an agent that found it then would be
// refused (it retries, a test does not), and another user could connect.
// So it is bound, listening and chmodded under a name of its own in the
// same directory, then linked to path: link(2), unlike rename, fails where
// path exists, so a gputop that started meanwhile keeps its socket. Where
// that name is too long for a socket, or the filesystem has no hard links,
// it is bound at path as before.
func listenAt(path string) (*net.UnixListener, error) {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".gputop-%d-%d.sock", os.Getpid(), time.Now().UnixNano()%1e9))
	if len(tmp) > maxPathLen {
		return listen0600(path, path)
	}
	ln, err := listen0600(tmp, path)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // path keeps the socket
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return ln, nil
	case errors.Is(err, fs.ErrExist):
		ln.Close()
		return nil, fmt.Errorf("socket %s: another gputop created it while this one started", path)
	default: // no hard links here
		ln.Close()
		return listen0600(path, path)
	}
}

// listen0600 binds and listens on a socket at name, mode 0600, which Serve
// removes itself (only if it is still ours); its errors name path, the
// socket asked for. A socket that cannot be set up leaves no file.
func listen0600(name, path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(name, 0o600); err != nil {
		ln.Close()
		os.Remove(name)
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	return ln, nil
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
		if s.open.Load() >= int64(s.maxConns) {
			s.refuseFull(nc)
			continue
		}
		s.open.Add(1)
		s.wg.Add(1)
		go s.handle(nc)
	}
}

// refuseFull answers a connection past maxConns with the reason, closes
// it and counts it; the log says so at most every 10 s, with the count.
// The reply is one short line into an empty socket buffer: it does not
// wait on the peer.
func (s *Server) refuseFull(nc *net.UnixConn) {
	n := s.refused.Add(1)
	reason := fmt.Sprintf("gputop holds %d connections, its limit; try again later", s.maxConns)
	if b, err := encodeLine(wire.Reply{Type: wire.TypeReply, Error: reason}); err == nil {
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		nc.Write(b)
	}
	nc.Close()
	if now := s.now(); n == 1 || now.Sub(s.loggedAt) >= 10*time.Second {
		s.loggedAt = now
		s.log(fmt.Sprintf("agent socket: refused a connection: it holds %d, its limit (%d refused so far)", s.maxConns, n))
	}
}

// Refused is how many connections were refused because the server held
// MaxConns.
func (s *Server) Refused() uint64 { return s.refused.Load() }

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
