// Remote hosts: the machines a multi-host view streams from (package
// remote), their state, and how their devices and processes are kept
// apart from this machine's and from each other's.

package store

import (
	"strconv"
)

// A remote host's processes are filed under a pid key that holds the host:
// HostPID(host, pid) = host<<PIDBits | pid. Host 0 is this machine, whose
// keys are plain pids. Linux pids are below 2^22 (PID_MAX_LIMIT), so two
// hosts' pid 1234 never meet, every key stays a positive int32 for up to
// MaxHosts hosts, and every part of the store keyed by pid (series,
// agents, rows, NVML's process lists) keeps hosts apart unchanged.
const (
	PIDBits  = 22
	MaxHosts = 1<<(31-PIDBits) - 1
)

// HostPID is the key of process pid on host (0: this machine); pid may be
// a namespace-local key of that host (NamespacePID).
func HostPID(host, pid int) int { return host<<PIDBits | pid }

// SplitPID returns the host and the host's own pid of a pid key (for a
// namespace-local key, the pid the process gave: its own in its namespace).
func SplitPID(key int) (host, pid int) {
	return key >> PIDBits & MaxHosts, key & (1<<PIDBits - 1)
}

// An agent whose pid gputop cannot see (it lives in a pid namespace that is
// neither gputop's nor one below it: another container sharing the socket)
// has only the pid it gave, its own inside that namespace, which another
// container's process may share (both pid 1). Such an agent is filed under
// a key of its connection: NamespacePID(conn, pid) = conn<<NSConnShift |
// pid, conn numbering those connections from 1. The bits above a host's
// keep it apart from every real pid and every host's keys, and the pid
// bits still hold what the process calls itself.
const NSConnShift = PIDBits + 9 // above the host bits

// NamespacePID is the key of the agent on connection conn (1..) that says
// it is pid in a pid namespace gputop cannot see.
func NamespacePID(conn, pid int) int { return conn<<NSConnShift | pid }

// NamespaceConn is the connection number of a namespace-local key; 0 for a
// key of a pid gputop (or a remote host) can see.
func NamespaceConn(key int) int { return key >> NSConnShift }

// MachineKey reports whether key can be a key of one machine's own
// process: a pid (0 < pid < 2^PIDBits) or a namespace-local key, with no
// host part. A remote host's stream must send only these.
func MachineKey(key int) bool {
	host, pid := SplitPID(key)
	return key > 0 && host == 0 && pid > 0
}

// PIDText is how a key is shown without its host: "1234", or "ns3:1" for
// pid 1 inside a namespace gputop cannot see, on its third such connection.
func PIDText(key int) string {
	_, pid := SplitPID(key)
	if c := NamespaceConn(key); c > 0 {
		return "ns" + strconv.Itoa(c) + ":" + strconv.Itoa(pid)
	}
	return strconv.Itoa(pid)
}

// Host is a remote host gputop streams from.
type Host struct {
	ID     int    // 1..MaxHosts: the host part of its processes' pid keys
	Name   string // as given to --ssh
	Up     bool   // streaming now
	Reason string // why it is not (while !Up): the last disconnect's reason
	// Limited is what the bounds on the host's stream kept out of the
	// view ("" when nothing), as package remote words it
	Limited string
	Since   int64 // when Up last changed
}

// SetHost adds or updates host h.ID and returns it as kept; an ID outside
// 1..MaxHosts is ignored (false).
func (s *Store) SetHost(h Host) (Host, bool) {
	if h.ID < 1 || h.ID > MaxHosts {
		return Host{}, false
	}
	h.Name, h.Reason, h.Limited = CleanText(h.Name), CleanText(h.Reason), CleanText(h.Limited)
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.hosts) < h.ID {
		s.hosts = append(s.hosts, Host{ID: len(s.hosts) + 1})
	}
	s.hosts[h.ID-1] = h
	s.gen++
	s.hostsVer++
	return h, true
}

// Hosts returns the remote hosts (none for a view of this machine alone).
func (s *Store) Hosts() []Host {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var hs []Host
	for _, h := range s.hosts {
		if h.Name != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// PIDLabel is how a pid key is shown: the pid, for a remote host's
// process "host:pid", and for a namespace-local one "ns3:1" (PIDText).
func (s *Store) PIDLabel(key int) string {
	host, _ := SplitPID(key)
	pid := PIDText(key)
	if host == 0 {
		return pid
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	name := "host" + strconv.Itoa(host)
	if host <= len(s.hosts) && s.hosts[host-1].Name != "" {
		name = s.hosts[host-1].Name
	}
	return name + ":" + pid
}

// HostDevice adds a remote host's device, or updates the one it added
// before (same host and UUID: the host reconnected), and returns it as
// kept, with its index; false when MaxDevices are known.
func (s *Store) HostDevice(d Device) (Device, bool) {
	d.Name, d.Err, d.Host = CleanText(d.Name), CleanText(d.Err), CleanText(d.Host)
	s.mu.Lock()
	defer s.mu.Unlock()
	d.Index = -1
	for _, o := range s.devices {
		if d.UUID != "" && o.UUID == d.UUID && o.Host == d.Host {
			d.Index, d.Rate = o.Index, o.Rate
			break
		}
	}
	if d.Index < 0 {
		if len(s.devices) >= MaxDevices {
			return Device{}, false
		}
		d.Index = len(s.devices)
		s.devices = append(s.devices, d)
	}
	s.devices[d.Index] = d
	s.gen++
	return d, true
}
