// Package store holds everything gputop knows: bounded per-series history
// (raw ring + min/max tiers), devices, processes, attached agents, rows
// and markers. Sources write into it through package ingest, whose Tap sees
// what each mutator returns it kept; the UI and exporters read from it.
// All methods are safe for concurrent use.
package store

import (
	"sort"
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
	LargestFree                // the largest free block in torch's cache, from the agent's layout readings
	// the in-use and held figures of the first framework beside torch
	// reporting an in-use one (JAX's bytes_in_use and pool_bytes, CuPy's
	// used_bytes and total_bytes), from the agent's framework readings
	FrameworkInUse
	FrameworkReserved
)

func (m Metric) String() string {
	return [...]string{"nvml_used", "nvml_reserved", "proc_used", "allocated", "reserved", "peak", "largest_free",
		"framework_in_use", "framework_reserved"}[m]
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
	// rows, markers and names stay. 0 keeps every series (replay:
	// a recording is shown whole).
	KeepGone int
	// MaxRows bounds the rows kept (0 or less: DefaultMaxRows):
	// past it the oldest go, counted in Bounds (see keepRows).
	MaxRows int
	// KeepEnded bounds the ended agents kept: past it, the agent that
	// ended longest ago is forgotten (its hello, its series; its rows
	// and markers stay, and its place in a job while a row names it) and
	// counted (EndedForgotten). 0 keeps every agent (replay).
	KeepEnded int
	// Log receives the store's notes for the user (e.g. an agent's device
	// past MaxDevices); nil drops them. Usually a logbook.Book's Add.
	Log func(string)
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
		KeepGone:  32,
		KeepEnded: 64,
		MaxRows:   DefaultMaxRows,
	}
}

// Attribution is a row given what a holders walk found after it: the row
// of PID on Dev at T, the walk's attribution (an end row's; or why there
// is none) and its ledger (nil: the row took none from it). The mutators
// that give rows their attribution return these, so that the Ingest's Tap
// (a recording) learns of them.
type Attribution struct {
	PID, Dev int
	T        int64
	Held     *wire.Held
	Ledger   *wire.Ledger
	// the same walk's frameworks (JAX, CuPy), whose Held the end row took
	Frameworks []wire.Framework
}

// Store is the shared state.
type Store struct {
	mu        sync.RWMutex
	opt       Options
	gen       uint64
	start     int64
	devices   []Device
	hosts     []Host // remote hosts by ID-1
	hostsVer  uint64 // moves on every change of a host (Shape)
	series    map[Key]*series
	nvml      []*[2]*series // NVMLUsed and NVMLReserved by device: no map lookup at 1 kHz
	procs     map[int][]wire.Proc
	procsAt   map[int]int64
	procNames map[int]string // pid -> last known name
	agents    map[int]*Agent
	agentsVer uint64             // moves on every change of an agent's state (Shape)
	ended     []int              // agents that ended, longest ended first (KeepEnded)
	forgotten map[int]int        // ended agents forgotten, by store device (KeepEnded)
	places    map[int]wire.Place // the places of forgotten agents whose rows are kept
	rowsVer   uint64             // moves on every change to the rows (Shape)
	gone      []int              // processes whose series may be dropped, longest gone first (KeepGone)
	// the rows, in time order; a deleted row leaves a hole (ID 0)
	// until compactRows takes the holes out together (rowkeep.go)
	rows     []wire.Row
	rowIndex map[uint64]int // a row's ID -> its index in rows
	lastRow  uint64         // the ID of the newest row made: how many were
	holes    int            // deleted rows still in s.rows
	bounds   Bounds         // what the bounds on rows left out
	notes    []string       // lines for Log, written once the lock is let go
	markers  []Marker       // markers that are no row's (a row's is the row, markers.go)
	// the newest marker's time (every row has one): End
	lastMarker int64
	// rows whose NVML figures wait for the NVML sample of their
	// instant: readings reach the store in batches (the sampler's every
	// 100 ms), so a row made from an agent's mark or OOM is often newer than
	// the newest NVML sample, and the value then at hand would be old (an
	// OOM that filled the GPU in 30 ms would show it nearly empty). Filled
	// by the first sample at or after the row's time.
	nvmlDue []rowAt
	// end rows waiting for their process's holders walk, by pid: the
	// agent's next answer with an attribution of the row's device gives it
	awaiting map[int][]awaitRow
	// the allocator's layout history of each agent process-device (layouts.go)
	layouts map[layoutKey]*layoutHist
	// the other frameworks' readings of each agent process-device (frameworks.go)
	frameworks map[layoutKey]*frameworkHist
}

// New returns an empty store.
func New(opt Options) *Store {
	if opt.RawCapacity == 0 && len(opt.Tiers) == 0 {
		opt = DefaultOptions()
	}
	// A ring of zero slots or a zero-width bucket would panic on the first
	// sample; an unsorted tier list would break the finest-first lookups.
	opt.RawCapacity = max(opt.RawCapacity, 1)
	if opt.MaxRows <= 0 {
		opt.MaxRows = DefaultMaxRows
	}
	var tiers []TierSpec
	for _, t := range opt.Tiers {
		if t.Width > 0 && t.Buckets > 0 {
			tiers = append(tiers, t)
		}
	}
	sort.SliceStable(tiers, func(i, j int) bool { return tiers[i].Width < tiers[j].Width })
	opt.Tiers = tiers
	return &Store{
		opt:        opt,
		series:     map[Key]*series{},
		procs:      map[int][]wire.Proc{},
		procsAt:    map[int]int64{},
		procNames:  map[int]string{},
		agents:     map[int]*Agent{},
		forgotten:  map[int]int{},
		places:     map[int]wire.Place{},
		awaiting:   map[int][]awaitRow{},
		rowIndex:   map[uint64]int{},
		layouts:    map[layoutKey]*layoutHist{},
		frameworks: map[layoutKey]*frameworkHist{},
	}
}

// Gen changes whenever the store changes; the UI skips redraws when it has not.
func (s *Store) Gen() uint64 { s.mu.RLock(); defer s.mu.RUnlock(); return s.gen }

// Shape counts what changes a screen's layout rather than its values: a UI
// compares it at every frame, so it copies nothing.
type Shape struct {
	RowCount, Markers, Devices int
	RowsMade                   uint64 // rows ever made, those deleted or dropped since included
	Agents                     uint64 // moves on every hello, end, OOM and holders report
	Rows                       uint64 // moves on every change to a row: added, completed, given its attribution
	Hosts                      uint64 // moves on every change of a remote host's state
}

// Shape returns the store's current Shape.
func (s *Store) Shape() Shape {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rows := len(s.rows) - s.holes
	return Shape{RowCount: rows, Markers: rows + len(s.markers), RowsMade: s.lastRow,
		Devices: len(s.devices), Agents: s.agentsVer, Rows: s.rowsVer, Hosts: s.hostsVer}
}

func (s *Store) touch(t int64) {
	s.gen++
	if s.start == 0 || (t != 0 && t < s.start) {
		s.start = t
	}
}

// CleanText makes text that comes from other processes or files (labels,
// argv, process and device names, holders reports, reasons) printable by
// the one rule of package printable: nothing a peer sends can drive the
// terminal, break a table row or shift its cells.
func CleanText(s string) string { return printable.Clean(s) }

// log hands a note to Options.Log; call it without the store's lock.
func (s *Store) log(line string) {
	if s.opt.Log != nil {
		s.opt.Log(line)
	}
}

// note keeps a line for Log until writeNotes; the caller holds the lock.
func (s *Store) note(line string) { s.notes = append(s.notes, line) }

// writeNotes hands the lines note kept to Log. A mutator that may note
// defers it before it takes the lock, so that it runs after the unlock.
func (s *Store) writeNotes() {
	s.mu.Lock()
	notes := s.notes
	s.notes = nil
	s.mu.Unlock()
	for _, l := range notes {
		s.log(l)
	}
}

// Start is the time of the first thing ingested (0 if nothing yet).
func (s *Store) Start() int64 { s.mu.RLock(); defer s.mu.RUnlock(); return s.start }
