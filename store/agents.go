// The agent processes: what each said (hello, samples, marks, OOMs,
// holders reports) and how it ended.

package store

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gputop/gputop/wire"
)

// Agent is one attached (or once attached) training process.
type Agent struct {
	Hello     wire.Hello
	Place     wire.Place  // the hello's place in a job (rank, world size, job id)
	DevMap    map[int]int // torch device index -> store device index
	Connected bool
	Ended     bool   // gone without bye (killed)
	EndReason string // why it ended or was disconnected
	EndedAt   int64
	Last      map[int]wire.Sample // by store device index
	Holders   *wire.Holders
	// HoldersPast is its holders reports in time order, the newest
	// MaxHoldersPast: a replay shows the one nearest before its cursor
	HoldersPast []wire.Holders
	OOMs        int

	rows bool // a row names it: its place outlives it (KeepEnded)
}

// AgentHello registers an agent process and maps its torch device indices
// to store devices by UUID; devices NVML does not know are added as
// agent-only devices, up to MaxDevices in all (a recording could not hold
// more). A device past that stays unmapped, its frames are ignored, and the
// log says so, naming the process. Rank fields wire.CheckPlace cannot use
// are left out, and the log names each. It returns the hello as kept and
// the agent-only devices it added.
func (s *Store) AgentHello(h wire.Hello) (wire.Hello, []Device) {
	var full []string // torch devices left unmapped: no room for them
	h, problems := wire.CheckPlace(h)
	defer func() {
		for _, p := range problems {
			s.log(fmt.Sprintf("pid %s: hello: %s", PIDText(h.PID), p))
		}
		if len(full) > 0 {
			s.log(fmt.Sprintf("pid %s (%s): %s not added: gputop keeps at most %d devices; their samples are ignored",
				PIDText(h.PID), helloName(h), listClipped(full, 8), MaxDevices))
		}
	}()
	h.Host, h.Torch, h.Python = helloText(h.Host), helloText(h.Torch), helloText(h.Python)
	h.HistoryError = helloText(h.HistoryError)
	h.Job = CleanText(h.Job) // wire.CheckPlace bounds it
	var clipped string
	h.Argv, clipped = keptArgv(h.Argv)
	if clipped != "" {
		problems = append(problems, clipped)
	}
	h.Devices = append([]wire.AgentDevice(nil), h.Devices...)
	for i := range h.Devices {
		h.Devices[i].Name = helloText(h.Devices[i].Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var added []Device
	a := &Agent{Hello: h, Place: h.Place(), DevMap: map[int]int{}, Connected: true, Last: map[int]wire.Sample{}}
	old := s.agents[h.PID]
	if old != nil {
		a.Holders, a.HoldersPast, a.OOMs = old.Holders, old.HoldersPast, old.OOMs
	}
	for _, ad := range h.Devices {
		idx := s.deviceByUUID(ad.UUID)
		if idx < 0 && ad.UUID == "" && old != nil {
			// No UUID to match on: a reconnecting process keeps the device
			// it had rather than adding a new one on every hello.
			if d, ok := old.DevMap[ad.Index]; ok {
				idx = d
			}
		}
		if idx < 0 && len(s.devices) >= MaxDevices {
			full = append(full, fmt.Sprintf("cuda:%d", ad.Index))
			continue
		}
		if idx < 0 {
			idx = len(s.devices)
			s.devices = append(s.devices, Device{Index: idx, UUID: ad.UUID, Name: ad.Name, Total: ad.Total, Source: "agent"})
			added = append(added, s.devices[idx])
		}
		a.DevMap[ad.Index] = idx
	}
	s.agents[h.PID] = a
	s.agentsVer++
	s.revive(h.PID)
	if i := slices.Index(s.ended, h.PID); i >= 0 {
		s.ended = slices.Delete(s.ended, i, i+1) // back: not ended any more
	}
	s.touch(h.T)
	return h, added
}

// What a hello keeps of its text. Its command line names the process in a
// pane and a log line; its other text describes it. A peer may send a
// hello of a MiB, and the store keeps a hello per agent (KeepEnded of
// them after they end), so each is kept small where it enters.
const (
	MaxArgvBytes = 4096 // argv's arguments together, a byte each between them
	MaxArgs      = 128  // arguments of argv
	MaxHelloText = 256  // host, torch, python, history_error, a device's name
)

// helloText is a hello's text made printable and cut to MaxHelloText.
func helloText(s string) string { return clipText(CleanText(s), MaxHelloText) }

// clipText cuts s to at most n bytes on a character boundary, "…" last
// when it cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := max(n-len(more), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// keptArgv is what the store keeps of a hello's argv: each argument made
// printable, the first MaxArgs of them, MaxArgvBytes in all (the argument
// that crosses it cut, "…" last). It says what it cut, for the log, or "".
func keptArgv(argv []string) ([]string, string) {
	out := make([]string, 0, min(len(argv), MaxArgs))
	total, left := 0, MaxArgvBytes
	cut := false
	for _, a := range argv {
		total += len(a) + 1
		if cut {
			continue
		}
		a = CleanText(a)
		if len(out) == MaxArgs || left <= 0 {
			cut = true
			continue
		}
		if len(a) > left {
			a, cut = clipText(a, left), true
		}
		left -= len(a) + 1
		out = append(out, a)
	}
	if !cut {
		return out, ""
	}
	return out, fmt.Sprintf("argv of %d arguments (%d bytes) kept to %d arguments (%d bytes): gputop keeps at most %d arguments and %d bytes",
		len(argv), max(total-1, 0), len(out), max(MaxArgvBytes-left-1, 0), MaxArgs, MaxArgvBytes)
}

// helloName is the base name of a hello's argv[0], for log lines.
func helloName(h wire.Hello) string {
	if len(h.Argv) == 0 || h.Argv[0] == "" {
		return "python"
	}
	name := path.Base(h.Argv[0])
	if r := []rune(name); len(r) > 40 {
		name = string(r[:40]) + "..."
	}
	return name
}

// listClipped joins up to n items and counts the rest.
func listClipped(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// AgentSample adds one allocator sample; smp.Dev is the torch index. It
// reports whether the sample was kept (its process and device known).
func (s *Store) AgentSample(pid int, smp wire.Sample) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return false
	}
	dev, ok := a.DevMap[smp.Dev]
	if !ok {
		return false
	}
	s.add(Key{dev, pid, Allocated}, smp.T, smp.Allocated)
	s.add(Key{dev, pid, Reserved}, smp.T, smp.Reserved)
	s.add(Key{dev, pid, Peak}, smp.T, smp.Peak)
	a.Last[dev] = smp
	s.touch(smp.T)
	return true
}

// AgentMark turns a mark from code into one row per device it
// lists, for at most wire.MaxMarkRows devices (the rest are counted in
// Bounds). Each row keeps the mark's dump, without the list of older
// dumps removed, which only the log line of the mark names, and the
// layout the mark read of its device (or, when it read none, the newest
// layout reading of the process-device at the mark's time).
func (s *Store) AgentMark(pid int, m wire.Mark) []wire.Row {
	defer s.writeNotes()
	dump := cleanDump(m.Dump)
	s.mu.Lock()
	defer s.mu.Unlock()
	if dump != nil {
		label, _ := cutLabel(m.Label, wire.MaxLabelBytes)
		s.note(DumpLine(pid, label, dump))
		d := *dump
		d.Removed = nil
		dump = &d
	}
	a := s.agents[pid]
	if a == nil {
		return nil
	}
	kind, suffix := m.Kind, ""
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	switch kind {
	case wire.MarkPhaseStart:
		suffix = " (start)"
	case wire.MarkPhaseEnd:
		suffix = " (end)"
	}
	label := s.labelEnding(m.Label, suffix)
	end := wire.IsEndLabel(label)
	if m.End != nil {
		end = *m.End
	}
	var rows []wire.Row
	for _, ds := range m.Devs {
		dev, ok := a.DevMap[ds.Dev]
		if !ok {
			continue
		}
		if len(rows) == wire.MaxMarkRows {
			if s.bounds.MarkDevs == 0 {
				s.note(fmt.Sprintf("pid %d: a mark listed more than %d devices: the devices past that (wire.MaxMarkRows) get no row; the summary pane counts them",
					pid, wire.MaxMarkRows))
			}
			s.bounds.MarkDevs++
			continue
		}
		al, re, pk := ds.Allocated, ds.Reserved, ds.Peak
		row := wire.Row{
			Type: wire.TypeRow, T: m.T, Label: label, Dev: dev, PID: pid, Source: "agent",
			Allocated: &al, Reserved: &re, Peak: &pk, End: end, Dump: dump, Layout: ds.Layout, Ledger: ds.Ledger, PeakLines: ds.PeakLines,
			Frameworks: ds.Frameworks,
		}
		if ds.NoTorch { // a JAX or CuPy device: no torch figures, never zeros
			row.Allocated, row.Reserved, row.Peak = nil, nil, nil
		}
		if row.Layout == nil {
			row.Layout = s.rowLayout(pid, dev, m.T) // the mark read none: the newest reading then
		}
		if ds.Limit > 0 {
			lim := ds.Limit
			row.Limit = &lim
		}
		if end {
			row.Held = ds.Held
		}
		rows = append(rows, s.addRow(row, kind))
	}
	return rows
}

// AgentOOM records an out-of-memory event as a red marker and a table row;
// the row takes the layout read in torch's OOM observer (or, when it read
// none, the newest layout reading of the process-device then).
// It returns the event as kept (its process, the device's total and its
// row's ID filled in), the row, and whether it was kept (its process and
// device known). The row is the event's: a recording holds the event, and
// loading it makes the row again.
func (s *Store) AgentOOM(pid int, o wire.OOM) (wire.OOM, wire.Row, bool) {
	o.Dump = cleanDump(o.Dump)
	if o.Dump != nil {
		defer func() { s.log(DumpLine(pid, wire.LabelOOM, o.Dump)) }()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return o, wire.Row{}, false
	}
	dev, ok := a.DevMap[o.Dev]
	if !ok {
		return o, wire.Row{}, false
	}
	a.OOMs++
	s.agentsVer++
	o.PID = pid
	for _, ad := range a.Hello.Devices {
		if ad.Index == o.Dev {
			o.DeviceTotal = ad.Total
		}
	}
	o.Row = 0
	o.Layout = cleanLayout(o.Layout)
	o.Framework, o.Error = clipText(CleanText(o.Framework), wire.MaxFrameworkText), clipText(CleanText(o.Error), wire.MaxOOMErrorBytes)
	o.Frameworks = cleanFrameworks(o.Frameworks)
	r := wire.OOMRow(o, dev)
	if r.Layout == nil {
		// torch's OOM observer read none: the newest reading before it
		r.Layout = s.rowLayout(pid, dev, o.T)
	}
	row := s.addRow(r, wire.MarkOOM)
	o.Row = row.ID
	return o, row, true
}

// MaxHoldersPast bounds the holders reports an agent keeps for a replay's
// cursor (Agent.HoldersPast); past it the oldest go.
const MaxHoldersPast = 64

// HoldersAt is the newest of a's holders reports taken at or before t, or nil.
func (a *Agent) HoldersAt(t int64) *wire.Holders {
	for i := len(a.HoldersPast) - 1; i >= 0; i-- {
		if a.HoldersPast[i].T <= t {
			return &a.HoldersPast[i]
		}
	}
	return nil
}

// AgentHolders stores the latest holders report of a process. It returns
// the report as kept, the end rows it gave their attribution, and whether
// it was kept (its process known).
func (s *Store) AgentHolders(pid int, h wire.Holders) (wire.Holders, []Attribution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return h, nil, false
	}
	h.PID = pid
	h.Groups = cleanGroups(h.Groups)
	h.Held = cleanHeld(h.Held)
	h.Ledger = cleanLedger(h.Ledger)
	h.Frameworks = cleanFrameworks(h.Frameworks)
	a.Holders = &h
	if len(a.HoldersPast) >= MaxHoldersPast {
		if s.bounds.HoldersDropped == 0 {
			s.note(fmt.Sprintf("holders reports: each process keeps its newest %d for a replay's cursor; older ones are dropped from memory (a recording keeps them)", MaxHoldersPast))
		}
		s.bounds.HoldersDropped++
		// a new array: copies taken by Agents() keep reading the old one
		a.HoldersPast = append(slices.Clone(a.HoldersPast[len(a.HoldersPast)-MaxHoldersPast+1:]), h)
	} else {
		a.HoldersPast = append(a.HoldersPast, h)
	}
	s.agentsVer++
	s.touch(h.T)
	var given []Attribution
	if h.Held != nil || h.Ledger != nil {
		// the walk ran after the rows waiting for it: it answers them
		walked := h.T
		if h.Held != nil {
			walked = h.Held.T
		} else if h.Ledger.T != 0 {
			walked = h.Ledger.T
		}
		// setHeld takes each row it answers off s.awaiting (a copy is
		// walked), once the row has what it waits for
		for _, w := range append([]awaitRow(nil), s.awaiting[pid]...) {
			if w.torchDev == h.Dev && w.t <= walked {
				given = s.setHeld(given, pid, w.dev, w.t, h.Held, h.Ledger, h.Frameworks)
			}
		}
	}
	return h, given, true
}

// cleanGroups copies holder groups with their text made safe to show.
func cleanGroups(gs []wire.HolderGroup) []wire.HolderGroup {
	gs = append([]wire.HolderGroup(nil), gs...)
	for i := range gs {
		g := &gs[i]
		g.Kind, g.Name, g.Hint = CleanText(g.Kind), CleanText(g.Name), CleanText(g.Hint)
		g.Examples = append([]string(nil), g.Examples...)
		for j := range g.Examples {
			g.Examples[j] = CleanText(g.Examples[j])
		}
	}
	return gs
}

// cleanHeld copies an attribution with its text made safe to show.
func cleanHeld(h *wire.Held) *wire.Held {
	if h == nil {
		return nil
	}
	c := *h
	c.Top = cleanGroups(h.Top)
	c.Skipped = CleanText(h.Skipped)
	return &c
}

// AgentEnded marks a process as gone. clean is true after a bye frame; its
// history stays either way. It returns the reason as kept, the end rows it
// gave their attribution (those still waiting for a walk: none will come),
// and whether it changed anything (a process known and connected).
func (s *Store) AgentEnded(pid int, t int64, clean bool, reason string) (string, []Attribution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil || !a.Connected {
		return reason, nil, false
	}
	reason = CleanText(reason)
	a.Connected, a.EndedAt, a.EndReason = false, t, reason
	s.agentsVer++
	s.markGone(pid)
	var given []Attribution
	for _, w := range append([]awaitRow(nil), s.awaiting[pid]...) {
		why := "the process ended before its holders walk answered"
		given = s.setHeld(given, pid, w.dev, w.t, &wire.Held{T: t, Skipped: why}, &wire.Ledger{T: t, Skipped: why}, nil)
	}
	if !clean {
		a.Ended = true
		// one marker per device, in device order (map order would make
		// the marker list differ from run to run)
		devs := make([]int, 0, len(a.DevMap))
		for _, dev := range a.DevMap {
			devs = append(devs, dev)
		}
		sort.Ints(devs)
		for i, dev := range devs {
			if i == 0 || dev != devs[i-1] {
				s.addMarker(Marker{T: t, Dev: dev, PID: pid, Label: "ended", Kind: "ended"})
			}
		}
	}
	s.touch(t)
	s.ended = append(s.ended, pid)
	if s.opt.KeepEnded > 0 && len(s.ended) > s.opt.KeepEnded {
		s.forget(s.ended[0])
		s.ended = s.ended[1:]
	}
	return reason, given, true
}

// forget drops an ended agent past KeepEnded: its hello, its series and
// what waits for it. What the rows need stays: the rows themselves, their
// markers, and the agent's place in a job while a row names it (the CSV's
// rank and job). The count of forgotten agents per device is what the
// process pane says is no longer listed.
func (s *Store) forget(pid int) {
	a := s.agents[pid]
	if a == nil {
		return
	}
	if a.rows && a.Place.Known() {
		s.places[pid] = a.Place
	}
	seen := map[int]bool{}
	for _, dev := range a.DevMap {
		if !seen[dev] {
			seen[dev] = true
			s.forgotten[dev]++
		}
	}
	delete(s.agents, pid)
	delete(s.awaiting, pid)
	s.dropSeries(pid)
	s.agentsVer++
	s.gen++
}

// EndedForgotten is how many ended agents that used store device dev the
// store has forgotten (KeepEnded).
func (s *Store) EndedForgotten(dev int) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.forgotten[dev]
}

// Places maps each agent process's key to its place in a job (the CSV's
// rank and job columns), forgotten agents' included while a row names
// them; processes that gave none are left out.
func (s *Store) Places() map[int]wire.Place {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := make(map[int]wire.Place, len(s.agents)+len(s.places))
	for pid, p := range s.places {
		m[pid] = p
	}
	for pid, a := range s.agents {
		if a.Place.Known() {
			m[pid] = a.Place
		}
	}
	return m
}

// Agents returns copies of all agents known, by pid order.
func (s *Store) Agents() []Agent {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Agent, 0, len(s.agents))
	for _, a := range s.agents {
		c := *a
		c.DevMap = copyMap(a.DevMap)
		c.Last = copyMap(a.Last)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hello.PID < out[j].Hello.PID })
	return out
}

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
