// What each frame takes from the store: skipped when nothing changed, the
// panes' data and the chart's columns when something did.

package ui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/view"
	"github.com/gputop/gputop/wire"
)

// peakCache extends a run peak with only the samples added since the last
// frame, instead of scanning the whole run each frame.
type peakCache struct {
	key      store.Key
	from, to int64
	v        uint64
	ok       bool
}

func (p *peakCache) get(st *store.Store, k store.Key, from, to int64) (uint64, bool) {
	if p.key != k || p.from != from || to < p.to {
		*p = peakCache{key: k, from: from, to: from}
	}
	if to > p.to {
		if v, ok := st.Max(k, p.to, to); ok && (!p.ok || v > p.v) {
			p.v, p.ok = v, true
		}
		p.to = to
	}
	return p.v, p.ok
}

// valueInterval is the shortest time between two redraws caused only by new
// values (samples at up to 1 kHz, a moving window): a sixtieth of the
// window, between minValueInterval and maxValueInterval, so the chart moves
// about as far at each redraw at every zoom (a second at the default one
// minute). Numbers that change 30 times a second cannot be read anyway, and
// each distinct frame costs the terminal renderer a full-screen pass; what
// changes the screen's shape (a snapshot row, a marker, a log line, an
// agent coming or going, a holders report) and every key are drawn at the
// next tick or at once. Live, the values are also redrawn with each new
// second of the clock. On the H200 each value redraw per second cost about
// 0.4% of a core (builds differing only in this interval, beside a training
// job); spikes are not lost at any rate, since each column keeps the max of
// its samples.
func (m *Model) valueInterval(now, start int64) time.Duration {
	return min(max(m.tl.windowLen(now, start)/60, minValueInterval), maxValueInterval)
}

const (
	minValueInterval = 250 * time.Millisecond
	maxValueInterval = time.Second
)

// shape is the store's Shape; in replay, snapshots and markers count only
// up to the cursor, as rows and markers appear when the cursor passes them.
func (m *Model) shape() store.Shape {
	sh := m.st.Shape()
	if m.opt.Replay {
		cursor := m.tl.cursor(m.now())
		sh.Snapshots, sh.Markers = m.st.CountSnapshots(cursor), m.st.CountMarkers(cursor)
	}
	return sh
}

// refresh recomputes the panes' data from the store. Frames where neither
// the store nor the window changed are skipped, and so are value-only
// changes within valueInterval of the last redraw, unless forced (keys,
// resize). It reports whether anything on screen may have changed.
func (m *Model) refresh(force bool) bool {
	if m.w == 0 {
		return false
	}
	st := m.st
	now := m.now()
	start := st.Start()
	if m.opt.Replay && m.tl.end < start {
		m.tl.end = start
	}
	from, to := m.tl.window(now, start, m.chart.Columns())
	gen := st.Gen()
	logN, _ := m.opt.Log.Last()
	if !force && gen == m.lastGen && logN == m.logN && from == m.lastFrom && to == m.lastTo {
		late := m.holders.late()
		m.holders.now = now // a wait turns into "no answer" by the clock alone
		return late != m.holders.late()
	}
	sh := m.shape()
	if !force && sh == m.lastShape && logN == m.logN && time.Duration(now-m.valuesAt) < m.valueInterval(now, start) {
		return false // only values moved, and they were drawn moments ago
	}
	m.lastGen, m.lastFrom, m.lastTo, m.lastShape, m.valuesAt, m.logN = gen, from, to, sh, now, logN
	m.refreshPanes(now)
	m.refreshChart(now, from, to)
	m.layout()
	return true
}

// valueAt returns a series' value at the cursor (replay, paused) or its
// latest value (live).
func (m *Model) valueAt(k store.Key, now int64) *uint64 {
	var v uint64
	var ok bool
	if m.opt.Replay || m.tl.paused {
		v, ok = m.st.ValueAt(k, m.tl.cursor(now))
	} else {
		v, _, ok = m.st.Latest(k)
	}
	if !ok {
		return nil
	}
	return &v
}

// refreshPanes recomputes everything but the chart.
func (m *Model) refreshPanes(now int64) {
	st := m.st
	start, last := st.Start(), st.End()
	cursor := m.tl.cursor(now)
	devs := st.Devices()
	if m.dev >= len(devs) {
		m.dev = 0
	}
	lines := make([]devLine, len(devs))
	for i, d := range devs {
		lines[i] = devLine{Dev: d, Used: m.valueAt(store.Key{Dev: i, Metric: store.NVMLUsed}, now)}
	}
	m.header.SetData(lines, m.dev)
	m.header.SetHosts(st.Hosts())

	m.procs.SetRows(view.Processes(st, m.dev, cursor, m.opt.Replay))
	sel, selOK := m.procs.Selected()

	// summary table
	end := last + 1
	if m.opt.Replay || m.tl.paused {
		end = cursor + 1
	}
	dr, nRows := m.rows.Get(st, m.opt.Replay, cursor, devs, m.dev)
	sd := summaryData{Dev: dr, DevIndex: m.dev, Start: start}
	m.nRows = nRows
	if m.dev < len(devs) {
		sd.DevName = devs[m.dev].Name
	}
	if v, ok := m.nvmlPeak.get(st, store.Key{Dev: m.dev, Metric: store.NVMLUsed}, start, end); ok {
		sd.NVMLPeak = &v
	}
	for _, r := range m.procs.rows {
		if !r.Agent {
			continue
		}
		pc := m.torchPeaks[r.PID]
		if pc == nil {
			pc = &peakCache{}
			m.torchPeaks[r.PID] = pc
		}
		if v, ok := pc.get(st, store.Key{Dev: m.dev, PID: r.PID, Metric: store.Peak}, start, end); ok && (sd.TorchPk == nil || v > *sd.TorchPk) {
			vv := v
			sd.TorchPk, sd.TorchPID = &vv, r.Label
		}
	}
	var total uint64
	if m.dev < len(devs) {
		total = devs[m.dev].Total
	}
	sd.OOM = latestOOM(sd.Dev, start, total)
	sd.Total = total
	m.table.SetData(sd)
	m.markFocus()

	// holders
	var rep *wire.Holders
	pid := 0
	if selOK {
		rep, pid = sel.Holders, sel.PID
	}
	m.holders.SetData(pid, rep, m.holdersNote(sel, selOK), now)

	m.status.SetLog(m.opt.Log.Last())
}

// refreshChart fetches the chart's columns for [from, to): NVML used of the
// device and, for the selected process when it has an agent, torch's
// reserved, peak and allocated. A series without a source is left out (the
// legend says why), never drawn as zeros.
func (m *Model) refreshChart(now, from, to int64) {
	st := m.st
	cols := m.chart.Columns()
	sel, selOK := m.procs.Selected()
	cd := chartData{From: from, To: to, Window: time.Duration(to - from)}
	series := func(name string, style lipgloss.Style, k store.Key) {
		s := chartSeries{Name: name, Style: style, Cols: st.Columns(k, from, to, cols), Now: m.valueAt(k, now)}
		if v, ok := st.ValueAt(k, from); ok {
			s.Hold = &v
		}
		cd.Series = append(cd.Series, s)
	}
	var notes []string
	nvmlKey := store.Key{Dev: m.dev, Metric: store.NVMLUsed}
	if st.Count(nvmlKey) > 0 {
		series("NVML used (driver)", m.styles.NVMLUsed, nvmlKey)
	} else {
		notes = append(notes, "NVML: no samples for this GPU")
	}
	agentsHere := 0
	for _, r := range m.procs.rows {
		if r.Agent {
			agentsHere++
		}
	}
	switch {
	case selOK && sel.Agent:
		k := store.Key{Dev: m.dev, PID: sel.PID}
		k.Metric = store.Reserved
		series("reserved (torch)", m.styles.Reserved, k)
		k.Metric = store.Peak
		series("peak (torch)", m.styles.Peak, k)
		k.Metric = store.Allocated
		series("allocated (torch)", m.styles.Allocated, k)
		note := "pid " + sel.Label
		if sel.Ended {
			note += " " + sel.Status
		}
		notes = append(notes, note)
	case agentsHere > 0 && selOK:
		notes = append(notes, fmt.Sprintf("allocator: pid %s has no agent (select an attached process)", sel.Label))
	default:
		notes = append(notes, "allocator: no agent attached")
	}
	cd.Note = strings.Join(notes, "  ")
	cd.Markers = st.MarkersIn(m.dev, from, to) // in time order
	m.chart.SetData(cd)
}
