// Package remote is the source of a multi-host view: for each host it runs
// `ssh HOST gputop serve --stdio`, decodes the stream (the recording
// format, recording.Decoder) as it comes and applies its frames to the
// local store through ingest, with the host's devices and processes filed
// apart from every other host's (store.HostDevice, store.HostPID). SSH is
// the transport and the authentication: gputop opens no port. A host that
// drops is shown disconnected with the reason, and is tried again after
// 1 s, 2 s, 4 s … up to MaxBackoff; the other hosts carry on.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options say how to reach one host.
type Options struct {
	Host string // as ssh takes it: a name, user@name, an alias of ~/.ssh/config
	// SSH is the ssh command and its own options ($GPUTOP_SSH, split at
	// spaces; default "ssh"). gputop adds BatchMode=yes (never a prompt on
	// the TUI's terminal) and server keepalives; everything else comes from
	// ~/.ssh/config or these.
	SSH []string
	// Command is the remote gputop, as the remote shell runs it (default
	// "gputop"); " serve --stdio" is added.
	Command string
	// Tool is this gputop's name and version, as a recording's header
	// writes it: a remote stream must carry the same.
	Tool string
	// Log takes what the user is told: a host connected, disconnected
	// and why (nil: nothing is told).
	Log func(string)
	// Devices is the most devices the host may add to the store
	// (DeviceShare; default store.MaxDevices).
	Devices int
	// MinBackoff and MaxBackoff bound the wait before a reconnection
	// (default 1 s and 30 s): each failure doubles it, a stream that was
	// up for StableAfter (default 10 s) resets it, so a host that connects
	// and fails at once is not tried every second.
	MinBackoff, MaxBackoff, StableAfter time.Duration
}

// Source streams one host into a store.
type Source struct {
	opt Options
	in  *ingest.Ingest // the way into the store
	st  *store.Store   // in's store, read
	id  int
	// the devices the host added, over all its connections: by UUID, and
	// how many (a UUID-less one counts each time it is added)
	own     map[string]int
	added   int
	limited string // what the bounds kept out of the last connection, for its host frame when it ends
}

// New returns the source of host id (1..store.MaxHosts, the host part of
// its processes' pid keys) and shows the host as connecting.
func New(in *ingest.Ingest, id int, opt Options) *Source {
	if len(opt.SSH) == 0 {
		opt.SSH = []string{"ssh"}
	}
	if opt.Command == "" {
		opt.Command = "gputop"
	}
	if opt.Log == nil {
		opt.Log = func(string) {}
	}
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = time.Second
	}
	if opt.MaxBackoff < opt.MinBackoff {
		opt.MaxBackoff = max(30*time.Second, opt.MinBackoff)
	}
	if opt.StableAfter <= 0 {
		opt.StableAfter = 10 * time.Second
	}
	if opt.Devices <= 0 {
		opt.Devices = store.MaxDevices
	}
	s := &Source{opt: opt, in: in, st: in.Store(), id: id, own: map[string]int{}}
	in.Apply(0, wire.Host{Type: wire.TypeHost, ID: id, Name: opt.Host, Reason: "connecting", T: time.Now().UnixNano()})
	return s
}

// Args is the command line a connection runs.
func (s *Source) Args() []string {
	args := append([]string(nil), s.opt.SSH...)
	args = append(args, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
		"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
		"--", s.opt.Host, s.opt.Command+" serve --stdio")
	return args
}

// Run connects, streams and reconnects until ctx is done.
func (s *Source) Run(ctx context.Context) {
	delay := s.opt.MinBackoff
	for {
		began := time.Now()
		streamed, reason := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if streamed && time.Since(began) >= s.opt.StableAfter {
			delay = s.opt.MinBackoff
		}
		s.down(fmt.Sprintf("%s (retrying in %v)", reason, delay))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, s.opt.MaxBackoff)
	}
}

// down shows the host disconnected: its agents end with the reason and its
// devices' process lists empty, so nothing of it looks alive.
func (s *Source) down(reason string) {
	now := time.Now().UnixNano()
	s.in.Apply(0, wire.Host{Type: wire.TypeHost, ID: s.id, Name: s.opt.Host, Reason: reason, Limited: s.limited, T: now})
	s.opt.Log(s.opt.Host + ": disconnected: " + reason)
	for _, a := range s.st.Agents() {
		if h, _ := store.SplitPID(a.Hello.PID); h == s.id && a.Connected {
			s.in.AgentEnded(a.Hello.PID, now, false, s.opt.Host+" disconnected")
		}
	}
	for _, d := range s.st.Devices() {
		if d.Host == s.opt.Host {
			if procs, _ := s.st.Procs(d.Index); len(procs) > 0 {
				s.in.Apply(0, wire.Procs{Type: wire.TypeProcs, T: now, Dev: d.Index})
			}
		}
	}
}

// session runs one connection to its end. It reports whether the stream
// got past its header, and why it ended.
func (s *Source) session(ctx context.Context) (streamed bool, reason string) {
	args := s.Args()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// ssh closes the remote's stdin when this pipe closes: serve --stdio
	// ends then, also when gputop itself is killed
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return false, err.Error()
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, err.Error()
	}
	var errTail tail
	cmd.Stderr = &errTail
	if err := cmd.Start(); err != nil {
		return false, fmt.Sprintf("cannot run %s: %v", args[0], err)
	}
	c := newConn(s)
	dec := recording.NewDecoder(s.opt.Host+"'s stream", out)
	stopShowing := func() {}
	var streamErr error
	for {
		f, err := dec.Next()
		if err != nil {
			streamErr = err
			break
		}
		if err := c.apply(f, dec.LineBytes()); err != nil {
			streamErr = err
			break
		}
		if c.up && !streamed {
			streamed = true
			c.upAt = time.Now().UnixNano()
			s.in.Apply(0, wire.Host{Type: wire.TypeHost, ID: s.id, Name: s.opt.Host, Up: true, T: c.upAt})
			s.opt.Log(s.opt.Host + ": connected (" + c.hdr.Tool + ")")
			stopShowing = c.showLimitsEvery(time.Second)
		}
	}
	stopShowing()
	s.limited = c.limited() // shown with the host's state when down() says why the stream ended
	var fe *recording.FormatError
	ended := errors.Is(streamErr, io.EOF) || errors.As(streamErr, &fe) && (fe.Truncated || fe.Empty)
	if !ended {
		// what is left of the stream is not read: the remote is stopped
		cmd.Cancel()
	} else {
		// ssh ends with the stream; its status says why
		t := time.AfterFunc(5*time.Second, func() { cmd.Cancel() })
		defer t.Stop()
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return streamed, "gputop ended"
	}
	var ve *versionError
	switch {
	case errors.As(streamErr, &ve):
		return streamed, ve.Error()
	case ended:
		// the stream ended (or ended mid-line): why is ssh's to say
		return streamed, s.exitReason(streamed, werr, errTail.String())
	case errors.As(streamErr, &fe):
		return streamed, "bad stream: " + fe.Error()
	}
	return streamed, s.opt.Host + ": " + streamErr.Error()
}

// exitReason words how ssh ended: its status and the last thing it (or the
// remote gputop) said on stderr. Status 255 is ssh's own failure before a
// stream (unreachable, refused, no key), or, after one, the remote gputop
// or the connection gone.
func (s *Source) exitReason(streamed bool, werr error, stderr string) string {
	status := "ssh " + s.opt.Host + " exited"
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		status = fmt.Sprintf("ssh %s exited with status %d", s.opt.Host, ee.ExitCode())
		if ee.ExitCode() == 255 && !streamed {
			status = "ssh " + s.opt.Host + " failed (status 255)"
		}
	}
	if streamed {
		status = "the stream ended: " + status
	}
	if last := lastLine(stderr); last != "" {
		status += ": " + last
	}
	return status
}

// versionError is a remote gputop of another version than this one.
type versionError struct {
	host, remote, local string
}

func (e *versionError) Error() string {
	remote := e.remote
	if remote == "" {
		remote = "a gputop that does not name its version"
	}
	return fmt.Sprintf("%s runs %s, this is %s: install the same gputop on both (or point --ssh-gputop at it)", e.host, remote, e.local)
}

// tail keeps the last bytes written to it (ssh's stderr).
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4096

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
