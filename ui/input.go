// What keys do (the key table, keys.go, binds them): the dispatch by
// mode, snapshots and end rows, export, holders, quitting.

package ui

import (
	"fmt"
	"path/filepath"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

// tooSmall is true while the screen only says it is too small.
func (m *Model) tooSmall() bool { return m.w < MinWidth || m.h < MinHeight }

// key handles a key press by the key table (keys.go); the caller redraws
// at once afterwards.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	mode := m.keyMode()
	var cmd tea.Cmd
	if a := m.keys.lookup(mode, k); a != nil && a.live != "" && m.opt.Replay {
		m.status.Set(a.live, true)
	} else if a != nil {
		cmd = a.do(m)
	} else if mode&(inLabel|inRename) != 0 {
		m.prompt, cmd = m.prompt.Update(k) // the label's text (a delete's prompt takes none)
	}
	m.markFocus()
	m.layout()
	return cmd
}

// keyMode is where keys act now: with the terminal too small nothing is
// on screen to act on, not even an open prompt, so only quitting works.
func (m *Model) keyMode() keyMode {
	switch {
	case m.tooSmall():
		return inTiny
	case !m.prompt.open:
		return inScreen
	case m.edit == nil:
		return inLabel
	case m.edit.Delete:
		return inDelete
	}
	return inRename
}

// span is what the timeline's keys measure from: now, and the run's first
// and last instants.
func (m *Model) span() (now, start, last int64) { return m.now(), m.st.Start(), m.st.End() }

// intoRun is how far the cursor is into the run (the zoom keys keep the
// cursor where it is).
func (m *Model) intoRun() time.Duration {
	return time.Duration(m.tl.cursor(m.now()) - m.st.Start())
}

// seekBy moves the cursor by frac of the window (← and →).
func (m *Model) seekBy(frac float64) {
	now, start, last := m.span()
	m.tl.seek(frac, now, start, last)
}

// stepDevice selects the next (1) or previous (-1) GPU, round the list.
func (m *Model) stepDevice(d int) {
	switch n := len(m.st.Devices()); n {
	case 0:
		m.status.Set("no GPU known yet: d and D have none to switch to", true)
	case 1:
		m.status.Set("one GPU (GPU 0): d and D have no other to switch to", false)
	default:
		m.dev = (m.dev + d + n) % n
	}
}

// stepSpeed makes a replay play slower (-1) or faster (1) and says the
// new speed in the status line: paused, the title does not show it.
func (m *Model) stepSpeed(d int) {
	if d < 0 {
		m.tl.slower()
	} else {
		m.tl.faster()
	}
	msg := "replay speed " + speedName(speeds[m.tl.speed])
	if m.tl.paused {
		msg += " (paused: space plays)"
	}
	m.status.Set(msg, false)
}

// sortProcs sorts the processes by the next order.
func (m *Model) sortProcs() {
	m.procs.cycleOrder()
	m.status.Set("processes sorted by "+orderName(m.procs.order)+" (o: next order)", false)
}

// openLabel opens the label prompt for a snapshot (s) or an end row (c).
func (m *Model) openLabel(end bool) tea.Cmd {
	what, def := "snapshot", fmt.Sprintf("snapshot %d", m.nRows+1)
	if end {
		what, def = "check", "After cleanup"
	}
	if len(m.st.Devices()) == 0 {
		m.status.Set("no GPU known yet: nothing to "+what, true)
		return nil
	}
	m.promptEnd = end
	return m.prompt.Open(def)
}

// confirmPrompt takes the prompt's label: a row's new label, a delete, or
// a snapshot (an end row after c).
func (m *Model) confirmPrompt() tea.Cmd {
	label := m.prompt.confirm()
	if !m.finishEdit(label) {
		var end *bool
		if m.promptEnd {
			end = &m.promptEnd
		}
		m.takeSnapshot(label, end)
	}
	m.closeEdit()
	return nil
}

func (m *Model) cancelPrompt() tea.Cmd {
	m.prompt.close()
	m.closeEdit()
	return nil
}

// exportKey writes the CSV to --csv's path, else a new file named by the time.
func (m *Model) exportKey() tea.Cmd {
	path := m.opt.CSVPath
	if path == "" {
		path = summary.DefaultCSVPath(m.opt.Now())
	}
	return m.export(path, false)
}

// togglePane hides or shows a pane below the chart (the chart takes its
// lines), and says in the key's help what pressing it again does.
func (m *Model) togglePane(id paneID) {
	m.hidden[id] = !m.hidden[id]
	if id == paneTable && m.hidden[id] && m.focus == focusRows {
		m.switchFocus() // the row keys go back to the processes, still on screen
	}
	verb := "hide "
	if m.hidden[id] {
		verb = "show "
	}
	name, what := "procs", "processes"
	if id == paneTable {
		name, what = "table", "summary"
	}
	m.keys.setHelp(name, verb+what)
}

// toggleLargestFree shows or hides the chart's largest free block, and says
// in the key's help what pressing it again does.
func (m *Model) toggleLargestFree() tea.Cmd {
	m.largestFree = !m.largestFree
	help := "chart largest free block"
	if m.largestFree {
		help = "hide largest free block"
	}
	m.keys.setHelp("largestfree", help)
	return nil
}

// toggleLedgerView switches the chart between its series and the stacked
// view of the selected process's ledgers, and says in the key's help what
// pressing it again does.
func (m *Model) toggleLedgerView() tea.Cmd {
	m.ledgerView = !m.ledgerView
	help := "chart ledger"
	if m.ledgerView {
		help = "chart series"
	}
	m.keys.setHelp("ledgerview", help)
	return nil
}

// quitKey quits from any mode; an open prompt closes first (when a write
// on quit fails, the screen stays).
func (m *Model) quitKey() tea.Cmd {
	m.prompt.close()
	return m.quit()
}

// quit writes the CSV first when --csv was given; if that fails the UI
// stays, says why, and a second quit key leaves without writing.
func (m *Model) quit() tea.Cmd {
	m.dump.stop()
	if m.opt.CSVPath != "" && m.opt.WriteCSV != nil && !m.quitArmed {
		return m.export(m.opt.CSVPath, true)
	}
	return tea.Quit
}

func (m *Model) export(path string, quitting bool) tea.Cmd {
	if m.opt.WriteCSV == nil {
		m.status.Set("CSV export is not available here", true)
		if quitting {
			return tea.Quit
		}
		return nil
	}
	write, st := m.opt.WriteCSV, m.st
	return func() tea.Msg {
		n := len(st.Rows())
		err := write(path)
		// the status line names the file wherever gputop was started from
		shown := path
		if abs, aerr := filepath.Abs(path); aerr == nil {
			shown = abs
		}
		return csvMsg{path: shown, rows: n, err: err, quitting: quitting}
	}
}

// takeSnapshot records the rows of the selected device now: one per agent
// process there (see store.TakeSnapshot); a replay takes none (keys.go).
// end, when set, says whether they end a run (else the label decides).
func (m *Model) takeSnapshot(label string, end *bool) {
	rows := m.in.TakeSnapshot(label, m.dev, m.now(), "key", end)
	what := "snapshot"
	if len(rows) > 0 && rows[0].End {
		what = "end row"
	}
	m.status.Set(fmt.Sprintf("%s %q on GPU %d", what, store.CleanText(label), m.dev), false)
	m.table.Unselect()
}

// toggleHolders opens the holders pane (asking the selected process for a
// fresh report when it can be asked) or closes it.
func (m *Model) toggleHolders(now int64) tea.Cmd {
	if m.showHolders {
		m.showHolders = false
		m.layout()
		return nil
	}
	m.showHolders = true
	defer m.layout()
	r, ok := m.procs.Selected()
	if !ok || !r.Agent || r.Ended || m.opt.RequestHolders == nil {
		return nil
	}
	m.holders.Ask(r.PID, r.Holders, now)
	ask, pid := m.opt.RequestHolders, r.PID
	return func() tea.Msg { return holdersAskedMsg{pid: pid, err: ask(pid)} }
}

// holdersNote explains why the holders pane has no report.
func (m *Model) holdersNote(r present.Process, ok bool) string {
	switch {
	case !ok:
		return "no process selected"
	case !r.Agent:
		return fmt.Sprintf("pid %d has no agent: holders need gputop.attach() inside that process", r.PID)
	case m.opt.Replay:
		return "no holders report in this recording up to the cursor"
	case r.Ended:
		return fmt.Sprintf("pid %d is gone; no report was taken while it ran", r.PID)
	case m.opt.RequestHolders == nil:
		return "holders can only be asked through the agent socket (--source agent or all)"
	}
	return "press h to close; h again asks for a fresh report"
}
