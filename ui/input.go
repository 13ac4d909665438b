// What keys do: snapshots and end rows, export, holders, quitting.

package ui

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/view"
)

// tooSmall is true while the screen only says it is too small.
func (m *Model) tooSmall() bool { return m.w < MinWidth || m.h < MinHeight }

// key handles a key press; the caller redraws at once afterwards.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	if m.tooSmall() {
		// nothing on screen to act on, not even an open prompt: only
		// quitting works
		if key.Matches(k, m.keys.Quit) {
			m.prompt.close()
			return m.quit()
		}
		return nil
	}
	if m.prompt.open {
		if k.String() == "ctrl+c" {
			m.prompt.close()
			return m.quit()
		}
		var cmd tea.Cmd
		m.prompt, cmd = m.prompt.Update(k)
		if label, ok := m.prompt.Take(); ok && !m.finishEdit(label) {
			var end *bool
			if m.promptEnd {
				end = &m.promptEnd
			}
			m.takeSnapshot(label, end)
		}
		if !m.prompt.open {
			m.closeEdit()
		}
		m.layout()
		return cmd
	}
	now := m.now()
	start, last := m.st.Start(), m.st.End()
	if ok, cmd := m.interactKey(k, now); ok {
		m.layout()
		return cmd
	}
	switch {
	case key.Matches(k, m.keys.Quit):
		return m.quit()
	case key.Matches(k, m.keys.Help):
		m.toggleHelp()
	case key.Matches(k, m.keys.Procs):
		m.togglePane(paneProcs, &m.keys.Procs, "processes")
	case key.Matches(k, m.keys.Table):
		m.togglePane(paneTable, &m.keys.Table, "snapshots")
	case key.Matches(k, m.keys.Snapshot):
		if len(m.st.Devices()) == 0 {
			m.status.Set("no GPU known yet: nothing to snapshot", true)
			return nil
		}
		m.promptEnd = false
		cmd := m.prompt.Open(fmt.Sprintf("snapshot %d", m.nRows+1))
		m.layout()
		return cmd
	case key.Matches(k, m.keys.EndRow):
		if len(m.st.Devices()) == 0 {
			m.status.Set("no GPU known yet: nothing to check", true)
			return nil
		}
		m.promptEnd = true
		cmd := m.prompt.Open("After cleanup")
		m.layout()
		return cmd
	case key.Matches(k, m.keys.Export):
		path := m.opt.CSVPath
		if path == "" {
			path = snapshot.DefaultCSVPath(m.opt.Now())
		}
		return m.export(path, false)
	case key.Matches(k, m.keys.Holders):
		return m.toggleHolders(now)
	case key.Matches(k, m.keys.Dump):
		return m.askDump()
	case key.Matches(k, m.keys.DumpInfo):
		cmd := m.toggleDump()
		m.layout()
		return cmd
	case key.Matches(k, m.keys.NextDevice):
		if n := len(m.st.Devices()); n > 0 {
			m.dev = (m.dev + 1) % n
		}
	case key.Matches(k, m.keys.PrevDevice):
		if n := len(m.st.Devices()); n > 0 {
			m.dev = (m.dev - 1 + n) % n
		}
	case key.Matches(k, m.keys.ZoomIn):
		m.tl.zoomIn(time.Duration(m.tl.cursor(now) - start))
	case key.Matches(k, m.keys.ZoomOut):
		m.tl.zoomOut(time.Duration(m.tl.cursor(now) - start))
	case key.Matches(k, m.keys.Pause):
		m.tl.togglePause(now, start, last)
	case key.Matches(k, m.keys.Back):
		m.tl.seek(-0.1, now, start, last)
	case key.Matches(k, m.keys.Forward):
		m.tl.seek(0.1, now, start, last)
	case key.Matches(k, m.keys.Start):
		m.tl.home(now, start, last)
	case key.Matches(k, m.keys.End):
		m.tl.toEnd(now, last)
	case key.Matches(k, m.keys.Slower):
		m.tl.slower()
	case key.Matches(k, m.keys.Faster):
		m.tl.faster()
	}
	m.layout()
	return nil
}

// togglePane hides or shows a pane below the chart (the chart takes its
// lines), and says in the key's help what pressing it again does.
func (m *Model) togglePane(id paneID, b *key.Binding, name string) {
	m.hidden[id] = !m.hidden[id]
	if id == paneTable && m.hidden[id] && m.focus == focusRows {
		m.switchFocus() // the row keys go back to the processes, still on screen
	}
	verb := "hide "
	if m.hidden[id] {
		verb = "show "
	}
	b.SetHelp(b.Help().Key, verb+name)
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
		n := len(st.Snapshots())
		return csvMsg{path: path, rows: n, err: write(path), quitting: quitting}
	}
}

// takeSnapshot records the rows of the selected device at now (live) or at
// the replay cursor: one per agent process there (see store.TakeSnapshot).
// end, when set, says whether they end a run (else the label decides).
func (m *Model) takeSnapshot(label string, end *bool) {
	t := m.now()
	if m.opt.Replay {
		t = m.tl.cursor(t)
	}
	rows := m.in.TakeSnapshot(label, m.dev, t, "key", end)
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
func (m *Model) holdersNote(r view.Process, ok bool) string {
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
