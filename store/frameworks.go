// The other frameworks' allocators (JAX, CuPy) per agent process and
// device: their readings over time, the newest as they came and older
// ones the first of each minute, as layouts are kept.

package store

import (
	"fmt"
	"math"
	"slices"

	"github.com/gputop/gputop/wire"
)

// The bounds on one process-device's framework readings. An agent sends
// one every 100 ms: FrameworkReadings covers about 7 minutes as they
// came, FrameworkMinutes a day after that, one reading a minute.
const (
	FrameworkReadings = 4096
	FrameworkMinutes  = 1440
)

// FrameworksAt is what the frameworks other than torch held on one device
// of one process at a time: the newest reading at or before it.
type FrameworksAt struct {
	T          int64
	Frameworks []wire.Framework // the store's: read, never change them
	OK         bool
}

type frameworkHist struct {
	readings thinned[FrameworksAt]
	last     int64
}

// AgentFramework keeps a framework frame of agent process pid (r.Dev is
// its device index as the agent's hello listed it). It returns the frame
// as kept (its text made printable, its process filled in) and whether
// it was kept (its process and device known). What falls out of the
// bounds is counted in Bounds.FrameworksDropped and logged the first time.
func (s *Store) AgentFramework(pid int, r wire.FrameworkReading) (wire.FrameworkReading, bool) {
	defer s.writeNotes()
	r.PID = pid
	r.Frameworks = cleanFrameworks(r.Frameworks)
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return r, false
	}
	dev, ok := a.DevMap[r.Dev]
	if !ok {
		return r, false
	}
	k := layoutKey{pid, dev}
	h := s.frameworks[k]
	if h == nil {
		h = &frameworkHist{readings: newThinned(FrameworkReadings, FrameworkMinutes, func(f FrameworksAt) int64 { return f.T })}
		s.frameworks[k] = h
	}
	t := max(r.T, h.last) // times never go back, as series do
	h.last = t
	if h.readings.push(FrameworksAt{T: t, Frameworks: r.Frameworks, OK: true}) {
		s.frameworksDropped()
	}
	// the chart's series: the first framework with an in-use figure, as
	// the process pane shows it in torch's place
	for _, f := range r.Frameworks {
		if in, ok := f.Get(wire.FigInUse); ok {
			s.add(Key{dev, pid, FrameworkInUse}, t, in.Value)
			if re, ok := f.Get(wire.FigReserved); ok {
				s.add(Key{dev, pid, FrameworkReserved}, t, re.Value)
			}
			break
		}
	}
	s.touch(r.T)
	return r, true
}

func (s *Store) frameworksDropped() {
	if s.bounds.FrameworksDropped == 0 {
		s.note(fmt.Sprintf("frameworks: a process's newest %d readings per device are kept, then one a minute for %d minutes; older ones are dropped from memory (a recording keeps them)",
			FrameworkReadings, FrameworkMinutes))
	}
	s.bounds.FrameworksDropped++
}

// FrameworksAt returns the frameworks' figures of agent process pid on
// store device dev at time t (the newest reading at or before t); live
// and replay alike.
func (s *Store) FrameworksAt(pid, dev int, t int64) FrameworksAt {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.frameworksAt(pid, dev, t)
}

// frameworksAt is FrameworksAt; the caller holds the lock.
func (s *Store) frameworksAt(pid, dev int, t int64) FrameworksAt {
	h := s.frameworks[layoutKey{pid, dev}]
	if h == nil {
		return FrameworksAt{}
	}
	f, _ := h.readings.at(t)
	return f
}

// LatestFrameworks is FrameworksAt the newest reading.
func (s *Store) LatestFrameworks(pid, dev int) FrameworksAt {
	return s.FrameworksAt(pid, dev, math.MaxInt64)
}

// cleanFrameworks copies frameworks from outside with their text made
// printable and their lists cut to the wire's bounds (nil stays nil).
func cleanFrameworks(fs []wire.Framework) []wire.Framework {
	if fs == nil {
		return nil
	}
	out := slices.Clone(fs[:min(len(fs), wire.MaxFrameworks)])
	for i := range out {
		f := &out[i]
		f.Name = clipText(CleanText(f.Name), wire.MaxFrameworkText)
		f.Figures = slices.Clone(f.Figures[:min(len(f.Figures), wire.MaxFigures)])
		for j := range f.Figures {
			g := &f.Figures[j]
			g.Of, g.Native = clipText(CleanText(g.Of), wire.MaxFrameworkText), clipText(CleanText(g.Native), wire.MaxFrameworkText)
		}
		f.Settings = slices.Clone(f.Settings[:min(len(f.Settings), wire.MaxFrameworkNotes)])
		for j := range f.Settings {
			st := &f.Settings[j]
			st.Name, st.Value = clipText(CleanText(st.Name), wire.MaxFrameworkText), clipText(CleanText(st.Value), wire.MaxSettingBytes)
		}
		f.Held = cleanGroups(f.Held[:min(len(f.Held), wire.MaxFrameworkHeld)])
	}
	return out
}

// dropFrameworks forgets a process's framework readings; the caller
// holds the lock.
func (s *Store) dropFrameworks(pid int) {
	for k := range s.frameworks {
		if k.pid == pid {
			delete(s.frameworks, k)
		}
	}
}
