// The rows: completed with NVML figures, end rows waiting for and
// given their attribution, and rows taken from the store (a key, gputop snap).

package store

import (
	"slices"
	"sort"

	"github.com/gputop/gputop/wire"
)

// awaitRow is a row waiting for its agent's walk: an end row for its
// attribution and ledger, a row taken with a key or `gputop snap` for its
// ledger.
type awaitRow struct {
	dev, torchDev int
	t             int64
}

// rowAt names the rows of a device at a time.
type rowAt struct {
	dev int
	t   int64
}

func (s *Store) setAwaiting(pid int, rows []awaitRow) {
	if len(rows) == 0 {
		delete(s.awaiting, pid)
	} else {
		s.awaiting[pid] = rows
	}
}

// SetHeld gives the rows of pid on dev at time t what a walk that came
// after them found (a recording's held frame, or an answer that came some
// other way): an end row its attribution h, with the holders of its
// frameworks fws (JAX's live arrays), and with it (or after it) its
// ledger l, a row that waited for a walk its ledger l (either may be
// nil). It returns the rows
// it gave something to. Rows that already have an attribution or a
// ledger keep it.
func (s *Store) SetHeld(pid, dev int, t int64, h *wire.Held, l *wire.Ledger, fws []wire.Framework) []Attribution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setHeld(nil, pid, dev, t, cleanHeld(h), cleanLedger(l), cleanFrameworks(fws))
}

// setHeld appends to given each row it gives h or l, and ends the wait
// of the rows of pid on dev at t once none still waits (an end row for
// its attribution: a walk that sent only a ledger does not end it).
func (s *Store) setHeld(given []Attribution, pid, dev int, t int64, h *wire.Held, l *wire.Ledger, fws []wire.Framework) []Attribution {
	if h == nil && l == nil {
		return given
	}
	for i := range s.rows {
		r := &s.rows[i]
		if isHole(r) || r.PID != pid || r.Dev != dev || r.T != t {
			continue
		}
		rl := l
		if rl == nil && !r.End && r.Awaiting && r.Ledger == nil {
			// a row that waited for a ledger only: its wait ends too
			rl = &wire.Ledger{T: h.T, Skipped: h.Skipped}
			if rl.Skipped == "" {
				rl.Skipped = "its agent's walk came without a ledger (an agent from before ledgers)"
			}
		}
		a := Attribution{PID: pid, Dev: dev, T: t, Held: h}
		took := false
		if r.End && r.Held == nil && h != nil {
			r.Held, took = h, true
			if len(fws) > 0 {
				r.Frameworks, a.Frameworks = frameworksHeld(r.Frameworks, fws), fws
			}
		}
		// an end row takes a walk's ledger with its attribution (a held
		// frame of a ledger alone would give a loaded end row an
		// attribution that says there is none)
		if (r.End || r.Awaiting) && r.Ledger == nil && rl != nil && (!r.End || r.Held != nil) {
			r.Ledger, a.Ledger, took = rl, rl, true
		}
		if !took {
			continue
		}
		s.gen++
		s.rowsVer++
		if h == nil {
			// a held frame has one: a row answered by a walk that sent
			// a ledger and no attribution
			a.Held = &wire.Held{T: l.T, Skipped: "the walk sent no attribution"}
		}
		given = append(given, a)
	}
	waiting := false // a row of pid on dev at t still without what it waits for
	for i := range s.rows {
		if r := &s.rows[i]; !isHole(r) && r.PID == pid && r.Dev == dev && r.T == t && r.Awaiting && waitsForWalk(*r) {
			waiting = true
		}
	}
	if ws := s.awaiting[pid]; len(ws) > 0 && !waiting {
		keep := ws[:0]
		for _, w := range ws {
			if w.dev != dev || w.t != t {
				keep = append(keep, w)
			}
		}
		s.setAwaiting(pid, keep)
	}
	return given
}

// AddRow completes a row (NVML used at its time and the highest NVML
// used since the device's previous row, where NVML is known; values
// already set are kept) and appends it with an ID of the store's (the
// row's own is not kept: a recording's names a row of that recording). It
// returns the completed row.
// The peak covers [previous row's time, row.T] (from the store's start
// for the first row) and is exact while that range is inside the raw window.
func (s *Store) AddRow(row wire.Row) wire.Row {
	defer s.writeNotes()
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := row.Kind
	if kind == "" {
		kind = wire.MarkSnapshot
	}
	return s.addRow(row, kind)
}

func (s *Store) addRow(row wire.Row, kind string) wire.Row {
	row.Type = wire.TypeRow
	row.Label, row.Source, kind = s.label(row.Label), CleanText(row.Source), CleanText(kind)
	row.Held = cleanHeld(row.Held)
	row.Layout = cleanLayout(row.Layout)
	row.Ledger = cleanLedger(row.Ledger)
	row.PeakLines = cleanPeakLines(row.PeakLines)
	row.Frameworks = cleanFrameworks(row.Frameworks)
	if !row.End {
		for i := range row.Frameworks {
			row.Frameworks[i].Held = nil // only an end row's verdict reads them
		}
	}
	if row.Procs != nil {
		ps := append([]wire.Proc{}, (*row.Procs)...)
		for i := range ps {
			ps[i].Name = CleanText(ps[i].Name)
		}
		row.Procs = &ps
	}
	if a := s.agents[row.PID]; a != nil && row.PID > 0 {
		a.rows = true
	}
	if row.Awaiting && waitsForWalk(row) && row.PID > 0 {
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
			s.nvmlFigures(&row, sr, len(s.rows))
		}
	}
	row = s.putRow(row)
	s.lastMarker = max(s.lastMarker, row.T) // the row is a marker too
	s.touch(row.T)
	return row
}

// waitsForWalk reports whether a row that asked for its agent's walk
// still lacks what it waits for: an end row its attribution (its verdict
// is made of it), another row its ledger.
// frameworksHeld is an end row's frameworks (its figures, as they were
// at the row) with what holds each one's memory from the walk's
// frameworks fws; a framework only the walk saw is added as it found it.
// A new slice: readers of the row keep the old one.
func frameworksHeld(row, fws []wire.Framework) []wire.Framework {
	out := slices.Clone(row)
	for _, f := range fws {
		i := slices.IndexFunc(out, func(g wire.Framework) bool { return g.Name == f.Name })
		switch {
		case i >= 0 && len(out[i].Held) == 0:
			out[i].Held = f.Held
		case i < 0 && len(out) < wire.MaxFrameworks:
			out = append(out, f)
		}
	}
	return out
}

func waitsForWalk(r wire.Row) bool {
	if r.End {
		return r.Held == nil
	}
	return r.Ledger == nil
}

// nvmlFigures sets a row's NVML used (the last sample at or before its
// time) and NVML peak (since the device's previous row: the last of
// s.rows[:before] at or before it) where unset.
func (s *Store) nvmlFigures(row *wire.Row, sr *series, before int) {
	if row.NVMLUsed == nil {
		if v, _, ok := sr.valueAt(row.T); ok {
			row.NVMLUsed = &v
		}
	}
	if row.NVMLPeak == nil {
		from := s.start
		for i := before - 1; i >= 0; i-- {
			if r := &s.rows[i]; !isHole(r) && r.Dev == row.Dev && r.T <= row.T {
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
		s.fillRows(s.rows, d)
		s.gen++
		s.rowsVer++
	}
	s.nvmlDue = keep
}

// fillRows gives the rows of d in rows (s.rows or a copy of it, in
// the same order) their NVML figures from the samples at hand.
func (s *Store) fillRows(rows []wire.Row, d rowAt) {
	sr := s.series[Key{d.dev, 0, NVMLUsed}]
	if sr == nil {
		return
	}
	for i := range rows {
		if r := &rows[i]; !isHole(r) && r.Dev == d.dev && r.T == d.t && r.NVMLUsed == nil && r.NVMLPeak == nil {
			s.nvmlFigures(r, sr, i)
		}
	}
}

// TakeSnapshot records the rows of device dev at time t from what
// the store holds (a key press, `gputop snap`): NVML used at t and, for
// each agent process on dev with samples at or before t that had not
// ended by t, its allocator counters then (exact inside the raw window,
// see ValueAt) and its newest allocator layout reading at or before t
// (its own T says how old), one row per process in pid order; one row
// without a process (PID 0) when no agent process is there.
//
// end says whether the rows end a run (nil: the label decides, see
// wire.IsEndLabel). With ask (the caller has a way to reach the agents:
// an agent socket), each row of a connected agent process is to ask its
// agent for a holders walk of that device (Awaiting until the answer: an
// end row for its attribution and ledger, and what holds its frameworks'
// memory (JAX's live arrays); another row for its ledger, except in a
// process with no torch figures on dev, which has no ledger to ask for):
// the asks are returned for the caller to send, with no lock held
// (ingest's asker); without, an end row says there is nothing to ask
// through, and another row has no ledger. When the
// device also has processes without an agent, an end row without a
// process lists them (Procs) as NVML saw them, for their verdict.
func (s *Store) TakeSnapshot(label string, dev int, t int64, source string, end *bool, ask bool) ([]wire.Row, []HolderAsk) {
	defer s.writeNotes()
	s.mu.Lock()
	defer s.mu.Unlock()
	label = s.label(label)
	isEnd := wire.IsEndLabel(label)
	if end != nil {
		isEnd = *end
	}
	var asks []HolderAsk
	var rows []wire.Row
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
		fw := s.frameworksAt(p, dev, t) // JAX's, CuPy's: their newest reading then
		if al == nil && !fw.OK {
			continue
		}
		agents[p] = true
		row := wire.Row{T: t, Label: label, Dev: dev, PID: p, Source: source,
			Allocated: al, Reserved: get(Reserved), Peak: get(Peak), End: isEnd, Layout: s.rowLayout(p, dev, t)}
		if fw.OK {
			row.Frameworks = fw.Frameworks
		}
		switch {
		case al == nil && !isEnd:
			// a JAX or CuPy process: no torch ledger to ask for (an end
			// row asks for what holds its frameworks' memory)
		case !isEnd && (!a.Connected || !ask):
			// no ledger: no agent to ask for one
		case !a.Connected:
			row.Held = &wire.Held{T: t, Skipped: "its agent was no longer attached to walk its holders"}
		case !ask:
			row.Held = &wire.Held{T: t, Skipped: "no agent socket here to ask for a holders walk"}
		default:
			for td, d := range a.DevMap {
				if d == dev {
					row.Awaiting = true
					asks = append(asks, HolderAsk{PID: p, Dev: dev, TorchDev: td, T: t})
					break
				}
			}
		}
		rows = append(rows, s.addRow(row, wire.MarkSnapshot))
	}
	var others []wire.Proc
	for _, p := range s.procs[dev] {
		if !agents[p.PID] {
			others = append(others, p)
		}
	}
	if len(rows) == 0 || (isEnd && len(others) > 0) {
		row := wire.Row{T: t, Label: label, Dev: dev, Source: source, End: isEnd}
		if isEnd && s.procsAt[dev] != 0 && s.procsAt[dev] <= t {
			// NVML's latest process list, when it is the one of this moment
			ps := append([]wire.Proc{}, others...)
			row.Procs = &ps
		}
		rows = append(rows, s.addRow(row, wire.MarkSnapshot))
	}
	return rows, asks
}

// HolderAsk is a row's request for its agent's holders walk: the row
// of PID on Dev at T, torch's device TorchDev.
type HolderAsk struct {
	PID, Dev, TorchDev int
	T                  int64
}

// Rows returns the summary rows in time order.
func (s *Store) Rows() []wire.Row {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rows := append([]wire.Row(nil), s.rows...)
	// rows still waiting for their NVML sample show the newest one before
	// it (a source that stopped may never send the one they wait for)
	for _, d := range s.nvmlDue {
		s.fillRows(rows, d)
	}
	if s.holes > 0 {
		rows = slices.DeleteFunc(rows, func(r wire.Row) bool { return isHole(&r) })
	}
	return rows
}

// CountRows is how many rows have a time at or before t.
func (s *Store) CountRows(t int64) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.countRows(t)
}

// countRows is how many rows have a time at or before t; the caller holds
// the lock.
func (s *Store) countRows(t int64) int {
	n := sort.Search(len(s.rows), func(i int) bool { return s.rows[i].T > t })
	if s.holes > 0 {
		k := n
		for i := range k {
			if isHole(&s.rows[i]) {
				n--
			}
		}
	}
	return n
}
