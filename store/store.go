// Package store holds everything gputop knows: bounded per-series history
// (raw ring + min/max tiers), devices, processes, attached agents, snapshots
// and markers. Sources write into it; the UI and exporters read from it.
// All methods are safe for concurrent use.
package store

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/wire"
)

// Metric names one kind of series.
type Metric uint8

const (
	NVMLUsed     Metric = iota // device used memory, from NVML
	NVMLReserved               // device memory reserved by the driver, from NVML
	ProcUsed                   // one process's used memory, from NVML
	Allocated                  // torch allocated_bytes.all.current, from the agent
	Reserved                   // torch reserved_bytes.all.current, from the agent
	Peak                       // torch allocated_bytes.all.peak, from the agent
)

func (m Metric) String() string {
	return [...]string{"nvml_used", "nvml_reserved", "proc_used", "allocated", "reserved", "peak"}[m]
}

// Key identifies a series. PID is 0 for device-wide series.
type Key struct {
	Dev    int
	PID    int
	Metric Metric
}

// TierSpec is one downsampling level.
type TierSpec struct {
	Width   time.Duration
	Buckets int
}

// Options bound the memory of every series. Tiers should be listed finest
// first, each covering a longer span than the one before (New sorts them by
// width and drops empty ones). The zero Options means DefaultOptions.
type Options struct {
	RawCapacity int // raw samples kept per series
	Tiers       []TierSpec
	// KeepGone bounds the processes whose series outlive them: once more
	// than this many processes have gone (their agent ended and NVML lists
	// them no more), the series of the longest gone are dropped. Their
	// snapshot rows, markers and names stay. 0 keeps every series (replay:
	// a recording is shown whole).
	KeepGone int
}

// DefaultOptions keep 30 s of raw samples at 1 kHz (the chart's 10 s and
// 30 s windows at full resolution), then 100 ms buckets for
// 10 min, 1 s for 2 h, 10 s for 24 h and 1 min for a week.
func DefaultOptions() Options {
	return Options{
		RawCapacity: 30_000,
		Tiers: []TierSpec{
			{100 * time.Millisecond, 6_000},
			{time.Second, 7_200},
			{10 * time.Second, 8_640},
			{time.Minute, 10_080},
		},
		KeepGone: 32,
	}
}

// Tap sees everything ingested, e.g. to write a recording. Frame and NVML
// are called with the store locked, in ingest order, so they must be cheap
// and must not call back into the store.
type Tap interface {
	NVML(dev int, t int64, used, reserved uint64)
	Frame(f any) // a wire.* value
}

// Device is what the store knows about one GPU.
type Device struct {
	Index  int
	UUID   string
	Name   string
	Total  uint64
	Source string  // "nvml" or "agent" (known only through an agent)
	Rate   float64 // achieved NVML samples per second
	Err    string  // last NVML error on this device; "" when healthy
	ErrAt  int64
}

// Agent is one attached (or once attached) training process.
type Agent struct {
	Hello     wire.Hello
	DevMap    map[int]int // torch device index -> store device index
	Connected bool
	Ended     bool   // gone without bye (killed)
	EndReason string // why it ended or was disconnected
	EndedAt   int64
	Last      map[int]wire.Sample // by store device index
	Holders   *wire.Holders
	OOMs      int
}

// Marker is a vertical line on the chart.
type Marker struct {
	T     int64
	Dev   int
	PID   int
	Label string
	Kind  string // snapshot, phase_start, phase_end, oom, ended
}

// Store is the shared state.
type Store struct {
	mu        sync.RWMutex
	opt       Options
	tap       Tap
	gen       uint64
	start     int64
	devices   []Device
	series    map[Key]*series
	nvml      []*[2]*series // NVMLUsed and NVMLReserved by device: no map lookup at 1 kHz
	procs     map[int][]wire.Proc
	procsAt   map[int]int64
	procNames map[int]string // pid -> last known name
	agents    map[int]*Agent
	agentsVer uint64 // moves on every change of an agent's state (Shape)
	rowsVer   uint64 // moves on every change to the snapshot rows (Shape)
	gone      []int  // processes whose series may be dropped, longest gone first (KeepGone)
	snapshots []wire.Snapshot
	markers   []Marker
	// the newest marker's time (every snapshot row has one): End
	lastMarker int64
	// snapshot rows whose NVML figures wait for the NVML sample of their
	// instant: readings reach the store in batches (the sampler's every
	// 40 ms), so a row made from an agent's mark or OOM is often newer than
	// the newest NVML sample, and the value then at hand would be old (an
	// OOM that filled the GPU in 30 ms would show it nearly empty). Filled
	// by the first sample at or after the row's time.
	nvmlDue []rowAt
	// end rows waiting for their process's holders walk, by pid: the
	// agent's next answer with an attribution of the row's device gives it
	awaiting map[int][]awaitRow
	// asks an agent for a holders walk of one torch device (nil: no agent
	// server, so nothing can be asked)
	asker func(pid, torchDev int) error
	logs  []string
	onLog func(string) // sees every line Log adds (logs keeps the last 200)
}

// awaitRow is an end row waiting for its attribution.
type awaitRow struct {
	dev, torchDev int
	t             int64
}

// rowAt names the snapshot rows of a device at a time.
type rowAt struct {
	dev int
	t   int64
}

// New returns an empty store.
func New(opt Options) *Store {
	if opt.RawCapacity == 0 && len(opt.Tiers) == 0 {
		opt = DefaultOptions()
	}
	// A ring of zero slots or a zero-width bucket would panic on the first
	// sample; an unsorted tier list would break the finest-first lookups.
	opt.RawCapacity = max(opt.RawCapacity, 1)
	var tiers []TierSpec
	for _, t := range opt.Tiers {
		if t.Width > 0 && t.Buckets > 0 {
			tiers = append(tiers, t)
		}
	}
	sort.SliceStable(tiers, func(i, j int) bool { return tiers[i].Width < tiers[j].Width })
	opt.Tiers = tiers
	return &Store{
		opt:       opt,
		series:    map[Key]*series{},
		procs:     map[int][]wire.Proc{},
		procsAt:   map[int]int64{},
		procNames: map[int]string{},
		agents:    map[int]*Agent{},
		awaiting:  map[int][]awaitRow{},
	}
}

// SetAsker installs how an end row asks its agent for a holders walk of a
// torch device (the agent server's RequestHeld). It is called without the
// store's lock held.
func (s *Store) SetAsker(ask func(pid, torchDev int) error) {
	s.mu.Lock()
	s.asker = ask
	s.mu.Unlock()
}

// SetTap installs a tap; call before sources start.
func (s *Store) SetTap(t Tap) { s.mu.Lock(); s.tap = t; s.mu.Unlock() }

// Gen changes whenever the store changes; the UI skips redraws when it has not.
func (s *Store) Gen() uint64 { s.mu.RLock(); defer s.mu.RUnlock(); return s.gen }

// Shape counts what changes a screen's layout rather than its values: a UI
// compares it at every frame, so it copies nothing.
type Shape struct {
	Snapshots, Markers, Logs, Devices int
	LastLog                           string
	Agents                            uint64 // moves on every hello, end, OOM and holders report
	Rows                              uint64 // moves on every change to a snapshot row: added, completed, given its attribution
}

// Shape returns the store's current Shape.
func (s *Store) Shape() Shape {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sh := Shape{Snapshots: len(s.snapshots), Markers: len(s.markers), Logs: len(s.logs),
		Devices: len(s.devices), Agents: s.agentsVer, Rows: s.rowsVer}
	if len(s.logs) > 0 {
		sh.LastLog = s.logs[len(s.logs)-1]
	}
	return sh
}

func (s *Store) touch(t int64) {
	s.gen++
	if s.start == 0 || (t != 0 && t < s.start) {
		s.start = t
	}
}

func (s *Store) frame(f any) {
	if s.tap != nil {
		s.tap.Frame(f)
	}
}

// ---- ingest ----

// MaxDevices bounds device indices, so a corrupt recording cannot make the
// store allocate a device table of any size.
const MaxDevices = 1024

// SetDevice adds or updates a device (by Index); an index outside
// [0, MaxDevices) is ignored.
func (s *Store) SetDevice(d Device) {
	if d.Index < 0 || d.Index >= MaxDevices {
		return
	}
	d.Name, d.Err = CleanText(d.Name), CleanText(d.Err)
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.devices) <= d.Index {
		s.devices = append(s.devices, Device{Index: len(s.devices)})
	}
	old := s.devices[d.Index]
	if d.Rate == 0 {
		d.Rate = old.Rate
	}
	s.devices[d.Index] = d
	s.gen++
	s.frame(wire.Device{Type: wire.TypeDevice, Index: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total})
}

// SetRate records a device's achieved NVML sample rate.
func (s *Store) SetRate(dev int, hz float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dev >= 0 && dev < len(s.devices) {
		s.devices[dev].Rate = hz
		s.gen++
	}
}

// SetDeviceError records (err != "") or clears (err == "") an NVML error.
func (s *Store) SetDeviceError(dev int, t int64, err string) {
	err = CleanText(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if dev < 0 || dev >= len(s.devices) || s.devices[dev].Err == err {
		return
	}
	s.devices[dev].Err, s.devices[dev].ErrAt = err, t
	s.gen++
	s.frame(wire.DevError{Type: wire.TypeDevError, T: t, Dev: dev, Error: err})
}

// AddNVML adds one NVML device sample. This is the 1 kHz hot path.
func (s *Store) AddNVML(dev int, t int64, used, reserved uint64) {
	s.mu.Lock()
	if dev >= 0 && dev < MaxDevices {
		if dev >= len(s.nvml) {
			s.nvml = append(s.nvml, make([]*[2]*series, dev+1-len(s.nvml))...)
		}
		p := s.nvml[dev]
		if p == nil {
			p = &[2]*series{s.get(Key{dev, 0, NVMLUsed}), s.get(Key{dev, 0, NVMLReserved})}
			s.nvml[dev] = p
		}
		p[0].add(t, used)
		p[1].add(t, reserved)
	} else {
		s.add(Key{dev, 0, NVMLUsed}, t, used)
		s.add(Key{dev, 0, NVMLReserved}, t, reserved)
	}
	if len(s.nvmlDue) > 0 {
		s.fillDue(dev, t)
	}
	s.touch(t)
	// under the lock, so a recording holds samples and the rows computed
	// from them in the same order the store saw them
	if s.tap != nil {
		s.tap.NVML(dev, t, used, reserved)
	}
	s.mu.Unlock()
}

func (s *Store) add(k Key, t int64, v uint64) { s.get(k).add(t, v) }

// get returns the series of k, creating it.
func (s *Store) get(k Key) *series {
	sr := s.series[k]
	if sr == nil {
		sr = newSeries(s.opt)
		s.series[k] = sr
	}
	return sr
}

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
		for k := range s.series {
			if k.PID == old {
				delete(s.series, k)
			}
		}
		s.gen++
	}
}

// revive takes a process (back) off the gone list: a pid reused, an agent
// reconnecting.
func (s *Store) revive(pid int) {
	if i := slices.Index(s.gone, pid); i >= 0 {
		s.gone = slices.Delete(s.gone, i, i+1)
	}
}

// SetProcs replaces the NVML process list of a device.
func (s *Store) SetProcs(dev int, t int64, procs []wire.Proc) {
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
	s.frame(wire.Procs{Type: wire.TypeProcs, T: t, Dev: dev, Procs: procs})
}

// CleanText makes text that comes from other processes or files (labels,
// argv, process and device names, holders reports, reasons) printable by
// the one rule of package printable: nothing a peer sends can drive the
// terminal, break a table row or shift its cells.
func CleanText(s string) string { return printable.Clean(s) }

// ProcName is the last name NVML's process lists gave pid ("" if none): a
// process that has exited, or whose /proc entry went away first, keeps it.
func (s *Store) ProcName(pid int) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.procNames[pid]
}

// DeviceByUUID returns the index of the device with this UUID, or -1.
func (s *Store) DeviceByUUID(uuid string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deviceByUUID(uuid)
}

func (s *Store) deviceByUUID(uuid string) int {
	for _, d := range s.devices {
		if uuid != "" && d.UUID == uuid {
			return d.Index
		}
	}
	return -1
}

// AgentHello registers an agent process and maps its torch device indices
// to store devices by UUID; devices NVML does not know are added as
// agent-only devices, up to MaxDevices in all (a recording could not hold
// more). A device past that stays unmapped, its frames are ignored, and the
// log says so, naming the process.
func (s *Store) AgentHello(h wire.Hello) {
	var full []string // torch devices left unmapped: no room for them
	defer func() {
		if len(full) > 0 {
			s.Log(fmt.Sprintf("pid %d (%s): %s not added: gputop keeps at most %d devices; their samples are ignored",
				h.PID, helloName(h), listClipped(full, 8), MaxDevices))
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	h.Host, h.Torch, h.Python = CleanText(h.Host), CleanText(h.Torch), CleanText(h.Python)
	h.Argv = append([]string(nil), h.Argv...)
	for i := range h.Argv {
		h.Argv[i] = CleanText(h.Argv[i])
	}
	h.Devices = append([]wire.AgentDevice(nil), h.Devices...)
	for i := range h.Devices {
		h.Devices[i].Name = CleanText(h.Devices[i].Name)
	}
	a := &Agent{Hello: h, DevMap: map[int]int{}, Connected: true, Last: map[int]wire.Sample{}}
	old := s.agents[h.PID]
	if old != nil {
		a.Holders, a.OOMs = old.Holders, old.OOMs
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
			s.frame(wire.Device{Type: wire.TypeDevice, Index: idx, UUID: ad.UUID, Name: ad.Name, Total: ad.Total})
		}
		a.DevMap[ad.Index] = idx
	}
	s.agents[h.PID] = a
	s.agentsVer++
	s.revive(h.PID)
	s.touch(h.T)
	s.frame(h)
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

// AgentSample adds one allocator sample; smp.Dev is the torch index.
func (s *Store) AgentSample(pid int, smp wire.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return
	}
	dev, ok := a.DevMap[smp.Dev]
	if !ok {
		return
	}
	s.add(Key{dev, pid, Allocated}, smp.T, smp.Allocated)
	s.add(Key{dev, pid, Reserved}, smp.T, smp.Reserved)
	s.add(Key{dev, pid, Peak}, smp.T, smp.Peak)
	a.Last[dev] = smp
	s.touch(smp.T)
	smp.PID = pid
	s.frame(smp)
}

// AgentMark turns a mark from code into one snapshot row per device.
func (s *Store) AgentMark(pid int, m wire.Mark) []wire.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return nil
	}
	label, kind := m.Label, m.Kind
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	switch kind {
	case wire.MarkPhaseStart:
		label += " (start)"
	case wire.MarkPhaseEnd:
		label += " (end)"
	}
	end := wire.IsEndLabel(label)
	if m.End != nil {
		end = *m.End
	}
	var rows []wire.Snapshot
	for _, ds := range m.Devs {
		dev, ok := a.DevMap[ds.Dev]
		if !ok {
			continue
		}
		al, re, pk := ds.Allocated, ds.Reserved, ds.Peak
		row := wire.Snapshot{
			Type: wire.TypeSnapshot, T: m.T, Label: label, Dev: dev, PID: pid, Source: "agent",
			Allocated: &al, Reserved: &re, Peak: &pk, End: end,
		}
		if end {
			row.Held = ds.Held
		}
		rows = append(rows, s.addSnapshot(row, kind))
	}
	return rows
}

// AgentOOM records an out-of-memory event as a red marker and a table row.
func (s *Store) AgentOOM(pid int, o wire.OOM) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return
	}
	dev, ok := a.DevMap[o.Dev]
	if !ok {
		return
	}
	a.OOMs++
	s.agentsVer++
	o.PID = pid
	for _, ad := range a.Hello.Devices {
		if ad.Index == o.Dev {
			o.DeviceTotal = ad.Total
		}
	}
	s.frame(o)
	s.addSnapshot(wire.OOMRow(o, dev), wire.MarkOOM)
}

// AgentHolders stores the latest holders report of a process.
func (s *Store) AgentHolders(pid int, h wire.Holders) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil {
		return
	}
	h.PID = pid
	h.Groups = cleanGroups(h.Groups)
	h.Held = cleanHeld(h.Held)
	a.Holders = &h
	s.agentsVer++
	s.touch(h.T)
	s.frame(h)
	if h.Held != nil {
		// the walk ran after the rows waiting for it: it answers them
		keep := s.awaiting[pid][:0]
		for _, w := range s.awaiting[pid] {
			if w.torchDev == h.Dev && w.t <= h.Held.T {
				s.setHeld(pid, w.dev, w.t, h.Held)
			} else {
				keep = append(keep, w)
			}
		}
		s.setAwaiting(pid, keep)
	}
}

func (s *Store) setAwaiting(pid int, rows []awaitRow) {
	if len(rows) == 0 {
		delete(s.awaiting, pid)
	} else {
		s.awaiting[pid] = rows
	}
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

// SetHeld gives the end row of pid on dev at time t its attribution (a
// recording's held frame, or an answer that came some other way). Rows
// that already have one keep it.
func (s *Store) SetHeld(pid, dev int, t int64, h *wire.Held) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setHeld(pid, dev, t, cleanHeld(h))
}

func (s *Store) setHeld(pid, dev int, t int64, h *wire.Held) {
	if h == nil {
		return
	}
	for i := range s.snapshots {
		r := &s.snapshots[i]
		if r.PID == pid && r.Dev == dev && r.T == t && r.End && r.Held == nil {
			r.Held = h
			s.gen++
			s.rowsVer++
			s.frame(wire.RowHeld{Type: wire.TypeRowHeld, PID: pid, T: t, Dev: dev, Held: h})
		}
	}
	if ws := s.awaiting[pid]; len(ws) > 0 {
		keep := ws[:0]
		for _, w := range ws {
			if w.dev != dev || w.t != t {
				keep = append(keep, w)
			}
		}
		s.setAwaiting(pid, keep)
	}
}

// AgentEnded marks a process as gone. clean is true after a bye frame; its
// history stays either way.
func (s *Store) AgentEnded(pid int, t int64, clean bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[pid]
	if a == nil || !a.Connected {
		return
	}
	reason = CleanText(reason)
	a.Connected, a.EndedAt, a.EndReason = false, t, reason
	s.agentsVer++
	s.markGone(pid)
	for _, w := range append([]awaitRow(nil), s.awaiting[pid]...) {
		s.setHeld(pid, w.dev, w.t, &wire.Held{T: t, Skipped: "the process ended before its holders walk answered"})
	}
	if clean {
		s.frame(wire.Bye{Type: wire.TypeBye, PID: pid, T: t})
	} else {
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
		s.frame(wire.Ended{Type: wire.TypeEnded, PID: pid, T: t, Reason: reason})
	}
	s.touch(t)
}

// Log adds a line to the store's log (shown in the status line).
// Lines are often built from what a peer sent (argv, torch version,
// reasons), so each is made printable here, once for every reader.
func (s *Store) Log(line string) {
	line = CleanText(line)
	s.mu.Lock()
	s.logs = append(s.logs, line)
	if len(s.logs) > 200 {
		s.logs = s.logs[len(s.logs)-200:]
	}
	s.gen++
	on := s.onLog
	s.mu.Unlock()
	if on != nil {
		on(line)
	}
}

// OnLog makes f see every line Log adds, however many (Logs returns only
// the last 200), in the caller's goroutine and without the store's lock:
// f must not block. Call before sources start.
func (s *Store) OnLog(f func(string)) { s.mu.Lock(); s.onLog = f; s.mu.Unlock() }

// ---- snapshots ----

// AddSnapshot completes a row (NVML used at its time and the highest NVML
// used since the device's previous snapshot, where NVML is known; values
// already set are kept) and appends it. It returns the completed row.
// The peak covers [previous snapshot's time, row.T] (from the store's start
// for the first row) and is exact while that range is inside the raw window.
func (s *Store) AddSnapshot(row wire.Snapshot) wire.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := row.Kind
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	return s.addSnapshot(row, kind)
}

func (s *Store) addSnapshot(row wire.Snapshot, kind string) wire.Snapshot {
	row.Type = wire.TypeSnapshot
	row.Label, row.Source, kind = CleanText(row.Label), CleanText(row.Source), CleanText(kind)
	row.Held = cleanHeld(row.Held)
	if row.Procs != nil {
		ps := append([]wire.Proc{}, (*row.Procs)...)
		for i := range ps {
			ps[i].Name = CleanText(ps[i].Name)
		}
		row.Procs = &ps
	}
	if row.End && row.Awaiting && row.Held == nil && row.PID > 0 {
		if a := s.agents[row.PID]; a != nil {
			for td, d := range a.DevMap {
				if d == row.Dev {
					s.awaiting[row.PID] = append(s.awaiting[row.PID], awaitRow{dev: row.Dev, torchDev: td, t: row.T})
					break
				}
			}
		}
	}
	if kind != wire.MarkSnapshot {
		row.Kind = kind // phase and oom rows keep their marker kind in recordings
	}
	if sr := s.series[Key{row.Dev, 0, NVMLUsed}]; sr != nil {
		if row.NVMLUsed == nil && row.NVMLPeak == nil && (sr.count == 0 || sr.last.t < row.T) {
			s.nvmlDue = append(s.nvmlDue, rowAt{row.Dev, row.T})
		} else {
			s.nvmlFigures(&row, sr, len(s.snapshots))
		}
	}
	// keep rows in time order (replay may add a row before later recorded ones)
	i := sort.Search(len(s.snapshots), func(i int) bool { return s.snapshots[i].T > row.T })
	s.snapshots = append(s.snapshots, wire.Snapshot{})
	copy(s.snapshots[i+1:], s.snapshots[i:])
	s.snapshots[i] = row
	s.rowsVer++
	s.addMarker(Marker{T: row.T, Dev: row.Dev, PID: row.PID, Label: row.Label, Kind: kind})
	s.touch(row.T)
	if row.OOM == nil {
		s.frame(row) // an OOM row is its oom frame's, recorded already
	}
	return row
}

// nvmlFigures sets a row's NVML used (the last sample at or before its
// time) and NVML peak (since the device's previous row: the last of
// s.snapshots[:before] at or before it) where unset.
func (s *Store) nvmlFigures(row *wire.Snapshot, sr *series, before int) {
	if row.NVMLUsed == nil {
		if v, _, ok := sr.valueAt(row.T); ok {
			row.NVMLUsed = &v
		}
	}
	if row.NVMLPeak == nil {
		from := s.start
		for i := before - 1; i >= 0; i-- {
			if r := &s.snapshots[i]; r.Dev == row.Dev && r.T <= row.T {
				from = r.T
				break
			}
		}
		// the level at from counts: it held until the next sample, which
		// may be after the row (two rows a few µs apart)
		pk, ok := sr.maxIn(from, row.T+1)
		if v, _, held := sr.valueAt(from); held && (!ok || v > pk) {
			pk, ok = v, true
		}
		if ok {
			row.NVMLPeak = &pk
		}
	}
}

// fillDue gives the rows of dev waiting for NVML samples up to t their
// figures, now that a sample at t is in.
func (s *Store) fillDue(dev int, t int64) {
	keep := s.nvmlDue[:0]
	for _, d := range s.nvmlDue {
		if d.dev != dev || d.t > t {
			keep = append(keep, d)
			continue
		}
		s.fillRows(s.snapshots, d)
		s.gen++
		s.rowsVer++
	}
	s.nvmlDue = keep
}

// fillRows gives the rows of d in rows (s.snapshots or a copy of it, in
// the same order) their NVML figures from the samples at hand.
func (s *Store) fillRows(rows []wire.Snapshot, d rowAt) {
	sr := s.series[Key{d.dev, 0, NVMLUsed}]
	if sr == nil {
		return
	}
	for i := range rows {
		if r := &rows[i]; r.Dev == d.dev && r.T == d.t && r.NVMLUsed == nil && r.NVMLPeak == nil {
			s.nvmlFigures(r, sr, i)
		}
	}
}

// TakeSnapshot records the snapshot rows of device dev at time t from what
// the store holds (a key press, `gputop snap`): NVML used at t and, for
// each agent process on dev with samples at or before t that had not
// ended by t, its allocator counters then (exact inside the raw window,
// see ValueAt), one row per process in pid order; one row without a
// process (PID 0) when no agent process is there.
//
// end says whether the rows end a run (nil: the label decides, see
// wire.IsEndLabel). Each end row of an agent process asks its agent for a
// holders walk of that device (Awaiting until the answer); when the device
// also has processes without an agent, an end row without a process
// lists them (Procs) as NVML saw them, for their verdict.
func (s *Store) TakeSnapshot(label string, dev int, t int64, source string, end *bool) []wire.Snapshot {
	s.mu.Lock()
	isEnd := wire.IsEndLabel(CleanText(label))
	if end != nil {
		isEnd = *end
	}
	type ask struct{ pid, dev, torchDev int }
	var asks []ask
	var rows []wire.Snapshot
	agents := map[int]bool{}
	pids := make([]int, 0, len(s.agents))
	for p := range s.agents {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	for _, p := range pids {
		a := s.agents[p]
		if !a.Connected && a.EndedAt != 0 && a.EndedAt < t {
			continue
		}
		get := func(m Metric) *uint64 {
			if sr := s.series[Key{dev, p, m}]; sr != nil {
				if v, _, ok := sr.valueAt(t); ok {
					return &v
				}
			}
			return nil
		}
		al := get(Allocated)
		if al == nil {
			continue
		}
		agents[p] = true
		row := wire.Snapshot{T: t, Label: label, Dev: dev, PID: p, Source: source,
			Allocated: al, Reserved: get(Reserved), Peak: get(Peak), End: isEnd}
		switch {
		case !isEnd:
		case !a.Connected:
			row.Held = &wire.Held{T: t, Skipped: "its agent was no longer attached to walk its holders"}
		case s.asker == nil:
			row.Held = &wire.Held{T: t, Skipped: "no agent socket here to ask for a holders walk"}
		default:
			for td, d := range a.DevMap {
				if d == dev {
					row.Awaiting = true
					asks = append(asks, ask{p, dev, td})
					break
				}
			}
		}
		rows = append(rows, s.addSnapshot(row, wire.MarkSnapshot))
	}
	var others []wire.Proc
	for _, p := range s.procs[dev] {
		if !agents[p.PID] {
			others = append(others, p)
		}
	}
	if len(rows) == 0 || (isEnd && len(others) > 0) {
		row := wire.Snapshot{T: t, Label: label, Dev: dev, Source: source, End: isEnd}
		if isEnd && s.procsAt[dev] != 0 && s.procsAt[dev] <= t {
			// NVML's latest process list, when it is the one of this moment
			ps := append([]wire.Proc{}, others...)
			row.Procs = &ps
		}
		rows = append(rows, s.addSnapshot(row, wire.MarkSnapshot))
	}
	asker := s.asker
	s.mu.Unlock()
	for _, a := range asks {
		if err := asker(a.pid, a.torchDev); err != nil {
			s.SetHeld(a.pid, a.dev, t, &wire.Held{T: t, Skipped: "could not ask for a holders walk: " + err.Error()})
		}
	}
	return rows
}

// ---- queries ----

// Devices returns a copy of the device list.
func (s *Store) Devices() []Device {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Device(nil), s.devices...)
}

// Procs returns the latest NVML process list of a device and its time.
func (s *Store) Procs(dev int) ([]wire.Proc, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]wire.Proc(nil), s.procs[dev]...), s.procsAt[dev]
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

// Snapshots returns the summary rows in time order.
func (s *Store) Snapshots() []wire.Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rows := append([]wire.Snapshot(nil), s.snapshots...)
	// rows still waiting for their NVML sample show the newest one before
	// it (a source that stopped may never send the one they wait for)
	for _, d := range s.nvmlDue {
		s.fillRows(rows, d)
	}
	return rows
}

// addMarker keeps the markers in time order (a marker of the same time
// goes after those already there), so a replay counts those before its
// cursor without a scan.
func (s *Store) addMarker(m Marker) {
	i := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > m.T })
	s.markers = slices.Insert(s.markers, i, m)
	s.lastMarker = max(s.lastMarker, m.T)
}

// CountMarkers is how many markers have a time at or before t.
func (s *Store) CountMarkers(t int64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T > t })
}

// CountSnapshots is how many rows have a time at or before t.
func (s *Store) CountSnapshots(t int64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sort.Search(len(s.snapshots), func(i int) bool { return s.snapshots[i].T > t })
}

// MarkersIn returns the markers of device dev in [from, to), in time order.
func (s *Store) MarkersIn(dev int, from, to int64) []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(len(s.markers), func(i int) bool { return s.markers[i].T >= from })
	var out []Marker
	for ; i < len(s.markers) && s.markers[i].T < to; i++ {
		if s.markers[i].Dev == dev {
			out = append(out, s.markers[i])
		}
	}
	return out
}

// Markers returns all chart markers, in time order.
func (s *Store) Markers() []Marker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Marker(nil), s.markers...)
}

// Logs returns the log lines, oldest first.
func (s *Store) Logs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string(nil), s.logs...)
}

// Start is the time of the first thing ingested (0 if nothing yet).
func (s *Store) Start() int64 { s.mu.RLock(); defer s.mu.RUnlock(); return s.start }

// Latest returns the newest sample of a series.
func (s *Store) Latest(k Key) (v uint64, t int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil || sr.count == 0 {
		return 0, 0, false
	}
	return sr.last.v, sr.last.t, true
}

// End is the time of the newest sample in any series, or of the newest
// snapshot row or marker when one is newer (a process's last rows often
// come after its last sample: a replay must reach them).
func (s *Store) End() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var end int64
	for _, sr := range s.series {
		if sr.count > 0 && sr.last.t > end {
			end = sr.last.t
		}
	}
	return max(end, s.lastMarker)
}

// ValueAt returns a series' last value at or before t; false before its
// first sample. It is exact inside the raw window. Older than that it is the
// last value of the finest bucket containing t, which may have been sampled
// up to one bucket width after t.
func (s *Store) ValueAt(k Key, t int64) (uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return 0, false
	}
	v, _, ok := sr.valueAt(t)
	return v, ok
}

// Columns aggregates a series over [from, to) into n chart columns, each
// with the min, max and last value of the samples it covers.
// See Column for what a column's values mean once tiers answer.
func (s *Store) Columns(k Key, from, to int64, n int) []Column {
	if n <= 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return make([]Column, n)
	}
	return sr.columns(from, to, n)
}

// Max returns the highest value of a series in [from, to). It is exact while
// the range is inside the raw window; older parts are answered by the
// finest buckets overlapping them, which may add up to one bucket width on
// either side.
func (s *Store) Max(k Key, from, to int64) (uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sr := s.series[k]
	if sr == nil {
		return 0, false
	}
	return sr.maxIn(from, to)
}

// Count returns how many samples a series has received in all.
func (s *Store) Count(k Key) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sr := s.series[k]; sr != nil {
		return sr.count
	}
	return 0
}

// Keys lists the series held.
func (s *Store) Keys() []Key {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ks := make([]Key, 0, len(s.series))
	for k := range s.series {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.Dev != b.Dev {
			return a.Dev < b.Dev
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.Metric < b.Metric
	})
	return ks
}
