// NVML's process lists, and which processes have gone (their series are
// dropped past Options.KeepGone).

package store

import (
	"slices"

	"github.com/gputop/gputop/wire"
)

// alive reports whether a process has a connected agent or is in an NVML
// process list.
func (s *Store) alive(pid int) bool {
	if a := s.agents[pid]; a != nil && a.Connected {
		return true
	}
	for _, procs := range s.procs {
		for _, p := range procs {
			if p.PID == pid {
				return true
			}
		}
	}
	return false
}

// markGone notes that a process may have gone; past KeepGone gone
// processes, the series of the longest gone are dropped.
func (s *Store) markGone(pid int) {
	if s.opt.KeepGone <= 0 || pid <= 0 || slices.Contains(s.gone, pid) || s.alive(pid) {
		return
	}
	s.gone = append(s.gone, pid)
	for len(s.gone) > s.opt.KeepGone {
		old := s.gone[0]
		s.gone = s.gone[1:]
		s.dropSeries(old)
		delete(s.procNames, old)
		s.gen++
	}
}

// dropSeries deletes every series of a process, and its layout histories.
func (s *Store) dropSeries(pid int) {
	for k := range s.series {
		if k.PID == pid {
			delete(s.series, k)
		}
	}
	s.dropLayouts(pid)
	s.dropFrameworks(pid)
}

// revive takes a process (back) off the gone list: a pid reused, an agent
// reconnecting.
func (s *Store) revive(pid int) {
	if i := slices.Index(s.gone, pid); i >= 0 {
		s.gone = slices.Delete(s.gone, i, i+1)
	}
}

// SetProcs replaces the NVML process list of a device and returns the list
// as kept (its names made printable).
func (s *Store) SetProcs(dev int, t int64, procs []wire.Proc) []wire.Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	procs = append([]wire.Proc(nil), procs...)
	for i := range procs {
		procs[i].Name = CleanText(procs[i].Name)
	}
	prev := s.procs[dev]
	s.procs[dev] = procs
	for _, p := range procs {
		s.revive(p.PID)
	}
	for _, p := range prev {
		s.markGone(p.PID)
	}
	s.procsAt[dev] = t
	for _, p := range procs {
		if p.Name != "" && p.Name != "?" {
			s.procNames[p.PID] = p.Name
		}
		if p.UsedUnknown {
			continue
		}
		s.add(Key{dev, p.PID, ProcUsed}, t, p.Used)
	}
	s.touch(t)
	return procs
}

// ProcName is the last name NVML's process lists gave pid ("" if none): a
// process that has exited, or whose /proc entry went away first, keeps it.
func (s *Store) ProcName(pid int) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.procNames[pid]
}

// Procs returns the latest NVML process list of a device and its time.
func (s *Store) Procs(dev int) ([]wire.Proc, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]wire.Proc(nil), s.procs[dev]...), s.procsAt[dev]
}
