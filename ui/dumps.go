package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/gputop/gputop/memdump"
	"github.com/gputop/gputop/snapshot"
	"github.com/gputop/gputop/view"
)

// agentCell is the process pane's AGENT cell: the agent's state, and
// whether it records torch's allocation history (so that a dump shows who
// allocated each block).
func agentCell(r view.Process) string {
	switch {
	case r.History > 0:
		return r.Status + ", history " + strconv.Itoa(r.History)
	case r.HistoryError != "":
		return r.Status + ", no history"
	}
	return r.Status
}

// dumpTop is how many allocating frames the dump pane lists per device.
const dumpTop = 20

// dumpModel is the dump pane: `gputop dump-info`'s text of one memory
// dump, read in the background (a dump can be hundreds of MB).
type dumpModel struct {
	styles  *Styles
	w, h    int
	path    string
	lines   []string
	err     string
	loading bool
}

func newDump(st *Styles) dumpModel { return dumpModel{styles: st} }

func (m *dumpModel) SetSize(w, h int) { m.w, m.h = w, h }

// Lines is how many lines the pane wants (a title, then the text).
func (m *dumpModel) Lines() int { return 1 + max(len(m.lines), 1) }

func (m *dumpModel) View() string {
	if m.h <= 0 {
		return ""
	}
	title := m.styles.TableHeader.Render("MEMORY DUMP") + "  " + m.styles.Dim.Render(m.path+"  (I closes)")
	body := ""
	switch {
	case m.loading:
		body = m.styles.Dim.Render("reading…")
	case m.err != "":
		body = m.err
	default:
		body = strings.Join(m.lines, "\n")
	}
	return fit(title+"\n"+body, m.w, m.h)
}

// dumpReadMsg carries a dump's text, or why it could not be read.
type dumpReadMsg struct {
	path string
	text string
	err  error
}

// dumpAskedMsg reports whether a dump request reached the agent.
type dumpAskedMsg struct {
	pid int
	err error
}

func readDump(path string) tea.Cmd {
	return func() tea.Msg {
		d, err := memdump.ReadFile(context.Background(), path)
		if err != nil {
			return dumpReadMsg{path: path, err: err}
		}
		var b strings.Builder
		err = memdump.WriteText(&b, d, dumpTop)
		return dumpReadMsg{path: path, text: b.String(), err: err}
	}
}

// dumpRow is the row whose dump the pane shows: the selected row when it
// has one, else the latest row of the GPU that has one.
func (m *tableModel) dumpRow() (snapshot.Row, bool) {
	rows := m.d.Dev.Rows
	if m.sel >= 0 && m.sel < len(rows) && rows[m.sel].Dump != nil && rows[m.sel].Dump.Path != "" {
		return rows[m.sel], true
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if d := rows[i].Dump; d != nil && d.Path != "" {
			return rows[i], true
		}
	}
	return snapshot.Row{}, false
}

// toggleDump opens the dump pane on the selected row's dump (or closes it).
func (m *Model) toggleDump() tea.Cmd {
	if m.showDump {
		m.showDump = false
		return nil
	}
	r, ok := m.table.dumpRow()
	if !ok {
		m.status.Set("no row of this GPU names a memory dump: M asks the selected process for one", true)
		return nil
	}
	m.showDump = true
	m.dump.path, m.dump.lines, m.dump.err, m.dump.loading = r.Dump.Path, nil, "", true
	return readDump(r.Dump.Path)
}

// askDump asks the selected process's agent for a memory dump; its row
// and the log name the file when it is written.
func (m *Model) askDump() tea.Cmd {
	r, ok := m.procs.Selected()
	switch {
	case !ok:
		m.status.Set("no process selected", true)
		return nil
	case !r.Agent || r.Ended:
		m.status.Set(fmt.Sprintf("pid %d has no attached agent: a dump needs gputop.attach() inside that process", r.PID), true)
		return nil
	case m.opt.RequestDump == nil:
		m.status.Set("dumps can only be asked through the agent socket (--source agent or all)", true)
		return nil
	}
	note := ""
	if r.History == 0 {
		note = " (no allocation history: its blocks will have no stacks; gputop.attach(history=N) records them)"
	}
	m.status.Set(fmt.Sprintf("asked pid %d for a memory dump%s", r.PID, note), false)
	ask, pid := m.opt.RequestDump, r.PID
	return func() tea.Msg { return dumpAskedMsg{pid: pid, err: ask(pid)} }
}

// onDump handles the dump messages.
func (m *Model) onDump(msg tea.Msg) {
	switch msg := msg.(type) {
	case dumpAskedMsg:
		if msg.err != nil {
			m.status.Set(fmt.Sprintf("cannot ask pid %d for a memory dump: %v", msg.pid, msg.err), true)
		}
	case dumpReadMsg:
		if msg.path != m.dump.path {
			return // the pane has moved on
		}
		m.dump.loading = false
		if msg.err != nil {
			m.dump.err = msg.err.Error() // memdump's errors name the file and byte; drawn through fit
			m.dump.err = strings.ReplaceAll(m.dump.err, "\n", " ")
			return
		}
		m.dump.lines = strings.Split(strings.TrimRight(msg.text, "\n"), "\n")
	}
	m.layout()
}
