package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/gputop/gputop/memdump"
	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

// agentCell is the process pane's AGENT cell: the agent's state, and
// whether it records torch's allocation history (so that a dump shows who
// allocated each block).
func agentCell(r present.Process) string {
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
// dump, read in the background (a dump can be hundreds of MB). One read
// at a time: opening another, closing the pane or quitting cancels the
// one in flight, and a read's answer counts only while it is the latest.
type dumpModel struct {
	styles  *Styles
	w, h    int
	path    string
	lines   []string
	err     string
	loading bool
	seq     int                // the latest read
	cancel  context.CancelFunc // ends it; nil when none is in flight
}

func newDump(st *Styles) dumpModel { return dumpModel{styles: st} }

func (m *dumpModel) SetSize(w, h int) { m.w, m.h = w, h }

// Lines is how many lines the pane wants (a title, then the text).
func (m *dumpModel) Lines() int {
	if m.err != "" && !m.loading {
		return 1 + strings.Count(m.wrappedErr(), "\n") + 1
	}
	return 1 + max(len(m.lines), 1)
}

// wrappedErr is why the dump cannot be shown, wrapped to the pane: it
// names the file first, and what went wrong after.
func (m *dumpModel) wrappedErr() string {
	if m.w <= 0 {
		return m.err
	}
	return ansi.Wrap(m.err, m.w, " /")
}

func (m *dumpModel) View() string {
	if m.h <= 0 {
		return ""
	}
	title := m.styles.TableHeader.Render("MEMORY DUMP") + "  " + m.styles.Dim.Render(m.path+"  (I closes)")
	body := ""
	switch {
	case m.loading:
		body = m.styles.Dim.Render("reading… (I cancels)")
	case m.err != "":
		body = m.wrappedErr()
	default:
		body = strings.Join(m.lines, "\n")
	}
	return fit(title+"\n"+body, m.w, m.h)
}

// dumpReadMsg carries a dump's text, or why it could not be read.
type dumpReadMsg struct {
	seq  int
	text string
	err  error
}

// dumpAskedMsg reports whether a dump request reached the agent.
type dumpAskedMsg struct {
	pid int
	err error
}

// read starts reading path, cancelling the read in flight.
func (m *dumpModel) read(path string) tea.Cmd {
	m.stop()
	ctx, cancel := context.WithCancel(context.Background())
	m.seq++
	m.path, m.lines, m.err, m.loading, m.cancel = path, nil, "", true, cancel
	seq := m.seq
	return func() tea.Msg {
		d, err := memdump.ReadFile(ctx, path)
		if err != nil {
			return dumpReadMsg{seq: seq, err: err}
		}
		var b strings.Builder
		err = memdump.WriteText(&b, d, dumpTop)
		return dumpReadMsg{seq: seq, text: b.String(), err: err}
	}
}

// stop cancels the read in flight, if any.
func (m *dumpModel) stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.loading = false
}

// dumpRow is the row whose dump the pane shows: the selected row when it
// has one, else the latest row of the GPU that has one.
func (m *summaryModel) dumpRow() (summary.Row, bool) {
	rows := m.d.Dev.Rows
	if m.sel >= 0 && m.sel < len(rows) && rows[m.sel].Dump != nil && rows[m.sel].Dump.Path != "" {
		return rows[m.sel], true
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if d := rows[i].Dump; d != nil && d.Path != "" {
			return rows[i], true
		}
	}
	return summary.Row{}, false
}

// toggleDump opens the dump pane on the selected row's dump (or closes
// it, ending a read still in flight).
func (m *Model) toggleDump() tea.Cmd {
	if m.showDump {
		m.showDump = false
		m.dump.stop()
		return nil
	}
	r, ok := m.table.dumpRow()
	if !ok {
		m.status.Set("no row of this GPU names a memory dump: M asks the selected process for one", true)
		return nil
	}
	m.showDump = true
	if host := m.rowHost(r); host != "" {
		// the path is the remote host's: a file here of that name is
		// another file (or nothing)
		m.dump.stop()
		m.dump.seq++
		m.dump.path, m.dump.lines = r.Dump.Path, nil
		m.dump.err = fmt.Sprintf("this dump was written on %s, not on this machine: run gputop dump-info on %s to read it", host, host)
		return nil
	}
	return m.dump.read(r.Dump.Path)
}

// rowHost is the remote host (gputop --ssh, or a recording of such a
// view) a row was taken on: its process's, else its GPU's; "" for this
// machine.
func (m *Model) rowHost(r summary.Row) string {
	if id, _ := store.SplitPID(r.PID); id != 0 {
		for _, h := range m.st.Hosts() {
			if h.ID == id {
				return h.Name
			}
		}
		return "host " + strconv.Itoa(id)
	}
	if devs := m.st.Devices(); r.Dev >= 0 && r.Dev < len(devs) {
		return devs[r.Dev].Host
	}
	return ""
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
		if msg.seq != m.dump.seq || !m.showDump {
			return // cancelled, or the pane has moved on
		}
		m.dump.stop() // done: releases its context
		if msg.err != nil {
			// memdump's errors name the file and the byte, and may quote
			// what the file holds (a class's name)
			m.dump.err = printable.Clean(strings.ReplaceAll(msg.err.Error(), "\n", " "))
			return
		}
		m.dump.lines = strings.Split(strings.TrimRight(msg.text, "\n"), "\n")
	}
	m.layout()
}
