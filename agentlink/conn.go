// One connection: the peer's uid checked, its frames read, checked and
// ingested, its hello registered, and how it ended said.

package agentlink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// client is one connection.
type client struct {
	conn    *net.UnixConn
	peerPID int          // from SO_PEERCRED, for logs before a hello; 0: not visible from here
	pid     int          // the key it is filed under (agentKey); 0 before its hello
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
		return fmt.Sprintf("pid %s (%s)", store.PIDText(c.pid), c.name)
	}
	if c.peerPID == 0 {
		return "a client in another pid namespace"
	}
	return fmt.Sprintf("client pid %d", c.peerPID)
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
	defer s.open.Add(-1)
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
				s.refuse(c, fmt.Sprintf("no %q, %q or %q frame within %v", wire.TypeHello, wire.TypeSnap, wire.TypeStatus, s.firstFrameTimeout), "closed")
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
		case wire.Status:
			s.status(c)
			return
		case wire.Hello:
			if !s.hello(c, f) {
				return
			}
			nc.SetReadDeadline(time.Time{}) // an agent may be quiet for long
		case wire.Sample:
			if c.known(s, f.Dev, "sample") {
				s.in.Apply(c.pid, f)
			}
		case wire.Mark:
			for _, d := range f.Devs {
				c.known(s, d.Dev, "mark")
			}
			s.in.Apply(c.pid, f)
		case wire.OOM:
			if c.known(s, f.Dev, "oom") {
				s.in.Apply(c.pid, f)
				msg := fmt.Sprintf("%s: CUDA out of memory on cuda:%d", c.who(), f.Dev)
				if f.Framework != "" {
					msg = fmt.Sprintf("%s: %s out of memory on cuda:%d", c.who(), printable.Clean(wire.Clip(f.Framework, wire.MaxFrameworkText)), f.Dev)
				}
				if f.Requested > 0 {
					msg += fmt.Sprintf(" (asked for %s)", mib(f.Requested))
				}
				s.log(msg)
			}
		case wire.Holders:
			s.in.Apply(c.pid, f)
		case wire.LayoutReading:
			if c.known(s, f.Dev, "layout") {
				s.in.Apply(c.pid, f)
			}
		case wire.FrameworkReading:
			if c.known(s, f.Dev, "framework") {
				s.in.Apply(c.pid, f)
			}
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
	if first {
		c.pid = s.agentKey(c.peerPID, h.PID)
	}
	h.PID = c.pid // a later hello has the same pid (session)
	old := s.agents[h.PID]
	s.agents[h.PID] = c
	// Under s.mu, so that the old connection's end cannot be recorded after
	// this hello and mark the new connection ended.
	s.in.Apply(h.PID, h)
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
	switch {
	case store.NamespaceConn(h.PID) > 0:
		verb += fmt.Sprintf(" from a pid namespace gputop cannot see (pid %d is its own there; NVML's pid for it is unknown), filed as %s",
			inner, store.PIDText(h.PID))
	case inner != h.PID:
		verb += fmt.Sprintf(" from another pid namespace (pid %d inside it; NVML counts it as %d)", inner, h.PID)
	}
	s.log(fmt.Sprintf("%s: %s (torch %s; %s)", c.who(), verb, torch, where))
	return true
}

// agentKey is the key an agent is filed under; called under s.mu.
func (s *Server) agentKey(peer, hello int) int {
	switch hostPID(peer, hello) {
	case 0:
		s.nextNS = s.nextNS%(1<<32-1) + 1
		return store.NamespacePID(s.nextNS, hello)
	case peer:
		return peer
	}
	return hello
}

// hostPID is the pid gputop and NVML know a process by, or 0 when gputop
// cannot tell it. An agent in a container says hello with its pid inside
// the container; the kernel gives gputop the peer's pid in gputop's own
// namespace (SO_PEERCRED), and NVML's process list uses that one, so the
// two can only be joined on it:
//   - a peer in a nested pid namespace in which it has the hello's pid
//     (NSpid) is that peer's pid;
//   - a peer the kernel cannot name (0: it lives in a pid namespace that
//     is neither gputop's nor below it, such as another container sharing
//     the socket), or one in a nested namespace in which the hello's pid
//     is not its own, is 0: its pid may be any other container's too;
//   - otherwise the peer is in gputop's namespace and the hello's pid is
//     kept: several agents simulated from one process (tests) stay apart.
func hostPID(peer, hello int) int {
	if peer <= 0 {
		return 0
	}
	if peer == hello {
		return hello
	}
	ns := nsPID(peer)
	if len(ns) >= 2 && ns[0] == peer {
		if ns[len(ns)-1] == hello {
			return peer
		}
		return 0
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
			s.in.AgentEnded(c.pid, t, clean, reason)
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
