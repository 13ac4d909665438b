// One connection's frames onto the local store: the remote's device
// indices become local ones, its pids pid keys holding the host, and what
// the host may add is bounded (limits.go).

package remote

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// conn is what one connection has learnt of the remote's numbering.
type conn struct {
	s    *Source
	hdr  wire.Recording
	up   bool        // the header came and its version is this gputop's
	devs map[int]int // the remote's device index -> the local store's
	// the last frame was an oom: the remote store's OOM row that follows
	// it is the row store.AgentOOM makes here again (as in the loader)
	oom struct {
		set bool
		pid int
		t   int64
	}
	live    map[int]bool // the remote's pids with a hello taken and no end since
	refused map[int]bool // the remote's pids whose hello was refused (up to maxRefused)
	upAt    int64        // when the stream came up
	// what the bounds kept out so far, counted by the session and shown
	// by showLimits (on a ticker)
	mu      sync.Mutex
	lim     limits
	changed bool // lim changed since the host's state last showed it
}

func newConn(s *Source) *conn {
	return &conn{s: s, devs: map[int]int{}, live: map[int]bool{}, refused: map[int]bool{}}
}

// leftOut counts n more of what a bound kept out (count is one of c.lim's
// fields); the first time on a connection, the log says what and why.
func (c *conn) leftOut(count *int, n int, first func() string) {
	c.mu.Lock()
	firstTime := *count == 0
	*count += n
	c.changed = true
	c.mu.Unlock()
	if firstTime {
		c.s.opt.Log(c.s.opt.Host + ": " + first() + " (the host's state counts the rest)")
	}
}

// limited is what the bounds kept out, in words ("" when nothing).
func (c *conn) limited() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lim.text(c.s.opt.Devices)
}

// showLimits shows what the bounds kept out with the host's state, when it
// changed since the last time.
func (c *conn) showLimits() {
	c.mu.Lock()
	changed := c.changed
	c.changed = false
	text := c.lim.text(c.s.opt.Devices)
	c.mu.Unlock()
	if changed {
		c.s.in.Apply(0, wire.Host{Type: wire.TypeHost, ID: c.s.id, Name: c.s.opt.Host, Up: true, Limited: text, T: c.upAt})
	}
}

// showLimitsEvery calls showLimits every d until stop is called, which
// waits for the last call: a flood of refused frames is not a flood of
// host frames, and what a stream that then went quiet left out is shown.
func (c *conn) showLimitsEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c.showLimits()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// refuse remembers pid's hello as refused, so its later frames are
// dropped rather than filed under a process gputop does not show.
func (c *conn) refuse(pid int) {
	delete(c.live, pid)
	if len(c.refused) < maxRefused {
		c.refused[pid] = true
	}
}

// key is the local pid key of the remote's pid.
func (c *conn) key(pid int) (int, error) {
	if !store.MachineKey(pid) {
		return 0, fmt.Errorf("%s: pid %d is not a process id of a Linux host (0 < pid < 2^%d) or a namespace-local key (store.NamespacePID)", c.s.opt.Host, pid, store.PIDBits)
	}
	return store.HostPID(c.s.id, pid), nil
}

// dev is the local index of the remote's device index (false: unknown,
// e.g. past store.MaxDevices).
func (c *conn) dev(remote int) (int, bool) {
	d, ok := c.devs[remote]
	return d, ok
}

// apply maps one decoded frame, read from a line of lineBytes, onto the
// local store. An error ends the connection.
func (c *conn) apply(f wire.Frame, lineBytes int64) error {
	in := c.s.in
	if h, ok := f.(wire.Recording); ok {
		c.hdr = h
		if h.Tool != c.s.opt.Tool {
			return &versionError{host: c.s.opt.Host, remote: h.Tool, local: c.s.opt.Tool}
		}
		c.up = true
		return nil
	}
	oom := c.oom
	c.oom.set = false
	switch v := f.(type) {
	case wire.Device:
		if idx, ok := c.device(v); ok {
			c.devs[v.Index] = idx
		}
		return nil
	case wire.Hello:
		return c.hello(v, lineBytes)
	case wire.NVML:
		if d, ok := c.dev(v.Dev); ok {
			v.Dev = d
			in.Apply(0, v)
		}
		return nil
	case wire.Procs:
		d, ok := c.dev(v.Dev)
		if !ok {
			return nil
		}
		procs, err := c.procs(v.Procs)
		if err != nil {
			return err
		}
		v.Dev, v.Procs = d, procs
		in.Apply(0, v)
		return nil
	case wire.DevError:
		if d, ok := c.dev(v.Dev); ok {
			v.Dev = d
			in.Apply(0, v)
		}
		return nil
	case wire.Row:
		d, ok := c.dev(v.Dev)
		if !ok {
			return nil
		}
		if v.PID != 0 {
			k, err := c.key(v.PID)
			if err != nil {
				return err
			}
			if c.dropped(v.PID) {
				return nil
			}
			if oom.set && v.IsOOMRowOf(oom.pid, oom.t) {
				return nil
			}
			v.PID = k
		}
		if v.Procs != nil {
			procs, err := c.procs(*v.Procs)
			if err != nil {
				return err
			}
			v.Procs = &procs
		}
		v.Dev = d
		in.Apply(v.PID, v)
		return nil
	case wire.RowHeld:
		d, ok := c.dev(v.Dev)
		if !ok {
			return nil
		}
		k, err := c.key(v.PID)
		if err != nil {
			return err
		}
		if c.dropped(v.PID) {
			return nil
		}
		v.Dev, v.PID = d, k
		in.Apply(k, v)
		return nil
	case recording.Dropped:
		c.s.opt.Log(fmt.Sprintf("%s: the remote gputop could not send everything: dropped %s", c.s.opt.Host, v.Drops))
		return nil
	case wire.Host:
		return nil // a remote that is itself a multi-host view: its hosts are not ours
	}
	// the agents' frames: dev is the agent's torch index, mapped by its hello
	var pid int
	switch v := f.(type) {
	case wire.Sample:
		pid = v.PID
	case wire.Samples:
		pid = v.PID
	case wire.Owned:
		pid = v.FramePID()
	default:
		return nil
	}
	k, err := c.key(pid)
	if err != nil {
		return err
	}
	switch f.(type) {
	case wire.Bye, wire.Ended:
		delete(c.live, pid)
		if c.refused[pid] {
			delete(c.refused, pid)
			return nil
		}
	}
	if c.dropped(pid) {
		return nil
	}
	switch v := f.(type) {
	case wire.OOM:
		in.Apply(k, v)
		c.oom.set, c.oom.pid, c.oom.t = true, v.PID, v.T
	default:
		in.Apply(k, f)
	}
	return nil
}

// dropped reports (and counts) a frame of an agent whose hello was refused.
func (c *conn) dropped(pid int) bool {
	if !c.refused[pid] {
		return false
	}
	c.leftOut(&c.lim.frames, 1, func() string {
		return fmt.Sprintf("pid %d: its frames are dropped with its hello", pid)
	})
	return true
}

// device adds (or finds again) a device of the host, within its share of
// the store's devices.
func (c *conn) device(v wire.Device) (int, bool) {
	s := c.s
	idx, known := s.own[v.UUID]
	if v.UUID == "" {
		known = false // no UUID to find it by: HostDevice adds it again
	}
	if !known && s.added >= s.opt.Devices {
		c.leftOut(&c.lim.devices, 1, func() string {
			return fmt.Sprintf("its device %d is not shown: %s has %d devices, its share of the %d gputop keeps", v.Index, s.opt.Host, s.added, store.MaxDevices)
		})
		return 0, false
	}
	idx = s.in.HostDevice(store.Device{UUID: v.UUID, Name: v.Name, Total: v.Total, Source: "nvml", Host: s.opt.Host, Memory: v.Memory})
	if idx < 0 {
		c.leftOut(&c.lim.devices, 1, func() string {
			return fmt.Sprintf("its device %d is not shown: gputop keeps at most %d devices", v.Index, store.MaxDevices)
		})
		return 0, false
	}
	if !known {
		s.added++
		if v.UUID != "" {
			s.own[v.UUID] = idx
		}
	}
	return idx, true
}

// hello takes an agent of the host within the bounds: a hello of at most
// MaxHelloBytes, MaxAgents connected, and only devices the host's stream
// listed (any other would become a device of no host here).
func (c *conn) hello(h wire.Hello, lineBytes int64) error {
	k, err := c.key(h.PID)
	if err != nil {
		return err
	}
	switch {
	case lineBytes > MaxHelloBytes:
		c.refuse(h.PID)
		c.leftOut(&c.lim.bigHellos, 1, func() string {
			return fmt.Sprintf("pid %d's hello of %s is refused: a remote hello may hold %s; the process shows without allocator figures",
				h.PID, units.Bytes(uint64(lineBytes)), units.Bytes(MaxHelloBytes))
		})
		return nil
	case !c.live[h.PID] && len(c.live) >= MaxAgents:
		c.refuse(h.PID)
		c.leftOut(&c.lim.agents, 1, func() string {
			return fmt.Sprintf("pid %d's hello is refused: %d agents of %s are connected, the most gputop takes from one host", h.PID, MaxAgents, c.s.opt.Host)
		})
		return nil
	}
	kept := make([]wire.AgentDevice, 0, len(h.Devices))
	for _, d := range h.Devices {
		if _, ok := c.s.own[d.UUID]; ok && d.UUID != "" {
			kept = append(kept, d)
		}
	}
	if n := len(h.Devices) - len(kept); n > 0 {
		c.leftOut(&c.lim.helloDevices, n, func() string {
			return fmt.Sprintf("pid %d's hello names devices that %s's stream did not list (%d): left out of its devices", h.PID, c.s.opt.Host, n)
		})
		h.Devices = kept
	}
	delete(c.refused, h.PID)
	c.live[h.PID] = true
	c.s.in.Apply(k, h)
	return nil
}

// procs maps an NVML process list's pids to pid keys, keeping the
// MaxProcs that use the most memory.
func (c *conn) procs(ps []wire.Proc) ([]wire.Proc, error) {
	if n := len(ps) - MaxProcs; n > 0 {
		ps = slices.Clone(ps)
		slices.SortStableFunc(ps, func(a, b wire.Proc) int { return cmp.Compare(b.Used, a.Used) })
		ps = ps[:MaxProcs]
		c.leftOut(&c.lim.procs, n, func() string {
			return fmt.Sprintf("an NVML process list of %d processes is cut to the %d using the most memory", n+MaxProcs, MaxProcs)
		})
	}
	out := make([]wire.Proc, len(ps))
	for i, p := range ps {
		k, err := c.key(p.PID)
		if err != nil {
			return nil, err
		}
		p.PID = k
		out[i] = p
	}
	return out, nil
}
