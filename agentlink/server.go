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
	"syscall"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/printable"
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
}

// Server accepts agent and snap connections on one socket.
type Server struct {
	path string
	ln   *net.UnixListener
	file os.FileInfo // the socket file as created, to remove only our own
	st   *store.Store
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

// client is one connection.
type client struct {
	conn    *net.UnixConn
	peerPID int          // from SO_PEERCRED, for logs before a hello
	pid     int          // from the hello, as NVML counts it (hostPID); 0 before it
	name    string       // argv[0]'s base name, for logs
	devs    map[int]bool // torch indices listed in the hello
	warned  map[int]bool // unknown torch indices already logged
	out     chan []byte  // requests for the writer goroutine

	wmu    sync.Mutex // one writer at a time: requests and the closing reply
	once   sync.Once
	done   chan struct{}
	reason string // why gputop closed the connection; set before done closes
}

// closedReason is why gputop closed the connection, or "" if it has not.
// Reading c.reason only after done is closed orders it after shut's write.
func (c *client) closedReason() string {
	select {
	case <-c.done:
		return c.reason
	default:
		return ""
	}
}

// shut closes the connection once; reason says why (empty: the peer left).
func (c *client) shut(reason string) {
	c.once.Do(func() {
		c.reason = reason
		close(c.done)
		c.conn.Close()
	})
}

func (c *client) write(b []byte, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := c.conn.Write(b)
	return err
}

func (c *client) who() string {
	if c.pid != 0 {
		return fmt.Sprintf("pid %d (%s)", c.pid, c.name)
	}
	return fmt.Sprintf("client pid %d", c.peerPID)
}

// maxPathLen is the longest socket path the kernel accepts (sun_path less
// its terminating NUL).
const maxPathLen = 107

// Listen creates the socket at path (mode 0600). A socket file left behind by
// a gputop that died is replaced; one on which a gputop still answers is an
// error, as is a path that holds something other than a socket.
func Listen(path string, st *store.Store, opt Options) (*Server, error) {
	if path == "" {
		return nil, errors.New("empty socket path")
	}
	if strings.HasPrefix(path, "@") {
		return nil, fmt.Errorf("socket path %s: abstract sockets have no file permissions, so they are not used", path)
	}
	if len(path) > maxPathLen {
		return nil, fmt.Errorf("socket path %s is %d bytes long; Unix sockets allow at most %d (set %s to a shorter path)",
			path, len(path), maxPathLen, SocketEnv)
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
		st:                st,
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
		s.log = st.Log
	}
	// end rows taken from the store (a key, gputop snap) ask their agents
	// for a holders walk through this server
	st.SetAsker(s.RequestHeld)
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

// checkPeerUID is the rule for who may talk to this gputop: its own user only.
func checkPeerUID(peer, ours int) error {
	if peer != ours {
		return fmt.Errorf("peer uid %d is not gputop's uid %d", peer, ours)
	}
	return nil
}

func (s *Server) handle(nc *net.UnixConn) {
	defer s.wg.Done()
	c := &client{conn: nc, done: make(chan struct{}), out: make(chan []byte, s.pending)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()

	uid, ppid, err := peerCred(nc)
	c.peerPID = ppid
	if err == nil {
		err = checkPeerUID(uid, s.uid)
	} else {
		err = fmt.Errorf("cannot check the peer's uid: %w", err)
	}
	if err != nil {
		s.refuse(c, err.Error(), "refused")
		return
	}

	nc.SetReadDeadline(time.Now().Add(s.firstFrameTimeout))
	lr := newLineReader(nc, wire.MaxFrameBytes)
	lr.budget = s.lines
	lr.onEvict = func(held, limit int) {
		c.shut(fmt.Sprintf("it held %s of an unfinished line when the unfinished lines of all connections passed gputop's %s budget",
			mib(uint64(held)), mib(uint64(limit))))
	}
	defer lr.release()
	var ses session
	for {
		line, err := lr.next()
		if err != nil {
			switch {
			case errors.Is(err, errTooLong):
				s.refuse(c, ses.tooLong().Error(), "closed")
			case errors.Is(err, os.ErrDeadlineExceeded) && ses.state == stateNew && c.closedReason() == "":
				s.refuse(c, fmt.Sprintf("no %q or %q frame within %v", wire.TypeHello, wire.TypeSnap, s.firstFrameTimeout), "closed")
			default:
				s.lost(c, err)
			}
			return
		}
		f, err := ses.next(line)
		if err == nil {
			if aerr := admit(f, s.now()); aerr != nil {
				err = fmt.Errorf("line %d: %w", ses.line, aerr)
			}
		}
		if err != nil {
			s.refuse(c, err.Error(), "closed")
			return
		}
		switch f := f.(type) {
		case nil: // blank line
		case wire.Snap:
			s.snap(c, f)
			return
		case wire.Hello:
			if !s.hello(c, f) {
				return
			}
			nc.SetReadDeadline(time.Time{}) // an agent may be quiet for long
		case wire.Sample:
			if c.known(s, f.Dev, "sample") {
				ingest.Apply(s.st, c.pid, f)
			}
		case wire.Mark:
			for _, d := range f.Devs {
				c.known(s, d.Dev, "mark")
			}
			ingest.Apply(s.st, c.pid, f)
		case wire.OOM:
			if c.known(s, f.Dev, "oom") {
				ingest.Apply(s.st, c.pid, f)
				msg := fmt.Sprintf("%s: CUDA out of memory on cuda:%d", c.who(), f.Dev)
				if f.Requested > 0 {
					msg += fmt.Sprintf(" (asked for %s)", mib(f.Requested))
				}
				s.log(msg)
			}
		case wire.Holders:
			ingest.Apply(s.st, c.pid, f)
		case wire.Bye:
			s.finish(c, true, f.T, "bye", c.who()+": detached")
			return
		}
	}
}

// known reports whether the agent's hello listed torch device dev; frames
// for other devices cannot be placed and are dropped, logged once per device.
func (c *client) known(s *Server, dev int, what string) bool {
	if c.devs[dev] {
		return true
	}
	if !c.warned[dev] {
		c.warned[dev] = true
		s.log(fmt.Sprintf("%s: %s for cuda:%d, which its hello did not list; ignored", c.who(), what, dev))
	}
	return false
}

// hello registers (or updates) the agent of this connection. A hello from a
// pid that already has a connection replaces that connection.
func (s *Server) hello(c *client, h wire.Hello) bool {
	first := c.pid == 0
	inner := h.PID
	h.PID = hostPID(c.peerPID, h.PID)
	c.devs = map[int]bool{}
	for _, d := range h.Devices {
		c.devs[d.Index] = true
	}
	c.warned = map[int]bool{}
	c.name = argv0(h.Argv)

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	old := s.agents[h.PID]
	s.agents[h.PID] = c
	c.pid = h.PID
	// Under s.mu, so that the old connection's end cannot be recorded after
	// this hello and mark the new connection ended.
	ingest.Apply(s.st, h.PID, h)
	s.mu.Unlock()

	if old != nil && old != c {
		old.shut("replaced by a new connection from the same pid")
		s.log(fmt.Sprintf("%s: reconnected; its previous connection is closed", c.who()))
	}
	if first {
		s.wg.Add(1)
		go s.writer(c)
	}
	var maps []string
	for _, d := range h.Devices {
		if i := s.st.DeviceByUUID(d.UUID); i >= 0 {
			maps = append(maps, fmt.Sprintf("cuda:%d = GPU %d", d.Index, i))
		}
	}
	where := "no CUDA device yet"
	if len(maps) > 0 {
		where = strings.Join(maps, ", ")
	}
	// peer text is made printable before it is put into a line: a sequence
	// cut short would otherwise run on over the rest of the line
	torch := printable.Clean(h.Torch)
	if torch == "" {
		torch = "?"
	}
	verb := "attached"
	if !first {
		verb = "updated its devices"
	}
	if inner != h.PID {
		verb += fmt.Sprintf(" from another pid namespace (pid %d inside it; NVML counts it as %d)", inner, h.PID)
	}
	s.log(fmt.Sprintf("%s: %s (torch %s; %s)", c.who(), verb, torch, where))
	return true
}

// hostPID is the pid gputop and NVML know a process by. An agent in a
// container says hello with its pid inside the container; the kernel gives
// gputop the peer's pid in gputop's own namespace, and NVML's process list
// uses that one, so the two can only be joined on it. The hello's pid is
// kept unless the peer is in a nested pid namespace in which it is that
// pid: several agents simulated from one process (tests) stay apart.
func hostPID(peer, hello int) int {
	if peer <= 0 || peer == hello {
		return hello
	}
	ns := nsPID(peer)
	if len(ns) >= 2 && ns[0] == peer && ns[len(ns)-1] == hello {
		return peer
	}
	return hello
}

// writer sends queued requests to an agent. A write that misses its deadline
// may have left half a frame on the stream, so the connection is closed.
func (s *Server) writer(c *client) {
	defer s.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case b := <-c.out:
			if err := c.write(b, s.writeTimeout); err != nil {
				reason := "sending a request failed: " + err.Error()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					reason = fmt.Sprintf("not reading requests (a write waited %v)", s.writeTimeout)
				}
				c.shut(reason)
				return
			}
		}
	}
}

// RequestHolders asks the agent of pid which references hold its CUDA
// memory. It does not wait: the answer arrives later as st.AgentHolders.
func (s *Server) RequestHolders(pid int) error { return s.request(pid, nil) }

// RequestHeld asks the agent of pid for a holders walk whose attribution
// is of torch device dev: the answer to an end row (store.SetAsker).
func (s *Server) RequestHeld(pid, dev int) error { return s.request(pid, &dev) }

func (s *Server) request(pid int, dev *int) error {
	s.mu.Lock()
	c := s.agents[pid]
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("no agent with pid %d is attached", pid)
	}
	b, err := encodeLine(wire.Request{Type: wire.TypeRequest, What: "holders", ID: id, Dev: dev})
	if err != nil {
		return err
	}
	select {
	case <-c.done:
		return fmt.Errorf("pid %d has disconnected", pid)
	default:
	}
	select {
	case c.out <- b:
		return nil
	default:
		return fmt.Errorf("pid %d is not reading requests (%d waiting)", pid, cap(c.out))
	}
}

// snap takes a snapshot of every known device for `gputop snap LABEL`.
func (s *Server) snap(c *client, f wire.Snap) {
	devs := s.st.Devices()
	if len(devs) == 0 {
		s.reply(c, wire.Reply{Type: wire.TypeReply, Error: "no devices known yet"})
		s.log(fmt.Sprintf("snapshot %q from the shell refused: no devices known yet", f.Label))
		s.finish(c, false, 0, "", "")
		return
	}
	t := s.now().UnixNano()
	for _, d := range devs {
		s.st.TakeSnapshot(f.Label, d.Index, t, "cli", f.End)
	}
	s.reply(c, wire.Reply{Type: wire.TypeReply, OK: true})
	s.log(fmt.Sprintf("snapshot %q from the shell on %d device(s)", f.Label, len(devs)))
	s.finish(c, false, 0, "", "")
}

func (s *Server) reply(c *client, r wire.Reply) {
	if b, err := encodeLine(r); err == nil {
		c.write(b, s.writeTimeout) // the peer may be gone; nothing to do then
	}
}

// refuse tells the peer why, closes the connection and logs it. An agent's
// history stays in the store, marked ended with the reason.
func (s *Server) refuse(c *client, reason, verb string) {
	s.reply(c, wire.Reply{Type: wire.TypeReply, Error: reason})
	s.finish(c, false, s.now().UnixNano(), "closed: "+reason, fmt.Sprintf("%s: %s: %s", c.who(), verb, reason))
}

// lost handles a connection that ended without bye: the peer died (e.g.
// SIGKILL), or gputop closed it (see client.closedReason).
func (s *Server) lost(c *client, err error) {
	reason := c.closedReason()
	switch {
	case reason != "":
		reason = "closed: " + reason
	case errors.Is(err, errCutOff):
		reason = "connection lost in the middle of a line"
	default:
		reason = "connection lost"
	}
	line := ""
	if c.pid != 0 || c.closedReason() != "" {
		line = c.who() + ": " + reason
	}
	s.finish(c, false, s.now().UnixNano(), reason, line)
}

// finish forgets a connection. If it is the current connection of an agent,
// the store records the end (clean after bye) and logLine is logged; a
// connection replaced by a newer one, or closed because gputop is stopping,
// ends silently.
func (s *Server) finish(c *client, clean bool, t int64, reason, logLine string) {
	s.mu.Lock()
	current := c.pid == 0 || s.agents[c.pid] == c
	if c.pid != 0 && current {
		delete(s.agents, c.pid)
		if !s.closing {
			s.st.AgentEnded(c.pid, t, clean, reason)
		}
	}
	delete(s.conns, c)
	closing := s.closing
	s.mu.Unlock()
	c.shut("")
	if current && !closing && logLine != "" {
		s.log(logLine)
	}
}

func argv0(argv []string) string {
	if len(argv) == 0 || argv[0] == "" {
		return "python"
	}
	return wire.Clip(printable.Clean(filepath.Base(argv[0])), 40)
}

func mib(b uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
