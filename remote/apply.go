// One connection's frames onto the local store: the remote's device
// indices become local ones, its pids pid keys holding the host.

package remote

import (
	"fmt"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
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
}

func newConn(s *Source) *conn { return &conn{s: s, devs: map[int]int{}} }

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

// apply maps one decoded frame onto the local store. An error ends the
// connection.
func (c *conn) apply(f wire.Frame) error {
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
		idx := in.HostDevice(store.Device{UUID: v.UUID, Name: v.Name, Total: v.Total, Source: "nvml", Host: c.s.opt.Host})
		if idx >= 0 {
			c.devs[v.Index] = idx
		}
		return nil
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
	case wire.Snapshot:
		d, ok := c.dev(v.Dev)
		if !ok {
			return nil
		}
		if v.PID != 0 {
			k, err := c.key(v.PID)
			if err != nil {
				return err
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
	switch v := f.(type) {
	case wire.OOM:
		in.Apply(k, v)
		c.oom.set, c.oom.pid, c.oom.t = true, v.PID, v.T
	default:
		in.Apply(k, f)
	}
	return nil
}

// procs maps an NVML process list's pids to pid keys.
func (c *conn) procs(ps []wire.Proc) ([]wire.Proc, error) {
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
