// What each frame takes from the store: skipped when nothing changed, the
// panes' data and the chart's columns when something did.

package ui

import (
	"time"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// valueInterval is the shortest time between two redraws caused only by new
// values (samples at up to 1 kHz, a moving window): a sixtieth of the
// window, between minValueInterval and maxValueInterval, so the chart moves
// about as far at each redraw at every zoom (a second at the default one
// minute). Numbers that change 30 times a second cannot be read anyway, and
// each distinct frame costs the terminal renderer a full-screen pass; what
// changes the screen's shape (a row, a marker, a log line, an
// agent coming or going, a holders report) and every key are drawn at the
// next tick or at once. Live, the values are also redrawn with each new
// minute of the title's clock; a frame whose text comes out the same as
// the last is not drawn (draw.go's redraw). On the H200 each value redraw per second cost about
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

// shape is the store's Shape; in replay, rows and markers count only
// up to the cursor, as rows and markers appear when the cursor passes them.
func (m *Model) shape() store.Shape {
	sh := m.st.Shape()
	if m.opt.Replay {
		cursor := m.tl.cursor(m.now())
		sh.RowCount, sh.Markers = m.st.CountRows(cursor), m.st.CountMarkers(cursor)
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
	m.setScreen(m.pres.Screen(st, m.query(now, from, to)), now)
	m.layout()
	return true
}

// query is what this frame asks of the store: the selected GPU and
// process, the cursor, the chart's window.
func (m *Model) query(now, from, to int64) present.Query {
	return present.Query{Dev: m.dev, Now: now, Cursor: m.tl.cursor(now), Replay: m.opt.Replay, Paused: m.tl.paused,
		From: from, To: to, Cols: m.chart.Columns(), PID: m.procs.sel, Picked: m.procs.chosen, LargestFree: m.largestFree, Ledger: m.ledgerView}
}

// setScreen hands each pane its part of the screen.
func (m *Model) setScreen(s present.Screen, now int64) {
	m.dev = s.Dev
	m.header.SetData(s.Devices, m.dev)
	m.header.SetHosts(s.Hosts)
	sel, selOK := s.SelectedProcess() // before the pane sorts the rows
	m.procs.SetRows(s.Procs, s.Selected, s.Picked, s.EndedHidden)
	m.procs.SetCache(s.Cache)
	m.procs.forecasts = s.Forecasts

	sd := summaryRows{Dev: s.Rows, DevIndex: m.dev, Start: s.Start, NVMLPeak: s.NVMLPeak, TorchPk: s.TorchPeak, TorchPID: s.TorchPeakLabel, Bounds: s.Bounds, Forecasts: s.Forecasts}
	m.nRows = s.AllRows
	var total uint64
	if m.dev < len(s.Devices) {
		sd.DevName, total = s.Devices[m.dev].Name, s.Devices[m.dev].Total
	}
	sd.OOM = latestOOM(sd.Dev, s.Start, total)
	sd.Total = total
	m.table.SetData(sd)
	m.markFocus()

	var rep *wire.Holders
	pid := 0
	if selOK {
		rep, pid = sel.Holders, sel.PID
	}
	m.holders.cursor = 0
	if m.opt.Replay {
		m.holders.cursor = m.tl.cursor(now)
	}
	m.holders.SetData(pid, rep, m.holdersNote(sel, selOK), now)
	m.status.SetLog(m.opt.Log.Last())

	cd := chartData{From: s.From, To: s.To, Window: time.Duration(s.To - s.From), Note: s.Note, Markers: s.Markers}
	for _, sr := range s.Series {
		cd.Series = append(cd.Series, chartSeries{Name: sr.Name, Style: m.styles.series(sr.Kind), Cols: sr.Cols, Hold: sr.Hold, Now: sr.Now})
	}
	if m.ledgerView {
		selID, selOK := uint64(0), false
		if r, ok := m.table.Selected(); ok {
			selID, selOK = r.ID, true
		}
		cd.Ledger = ledgerView{On: true, Bars: s.Ledger, Note: s.LedgerNote}
		cd.Ledger.Sel, cd.Ledger.Why = pickLedgerBar(s.Ledger, selID, selOK, m.tl.cursor(now))
	}
	m.chart.SetData(cd)
}
