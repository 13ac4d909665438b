package ui

import "github.com/gputop/gputop/printable"

// statusModel is the status line: the UI's own last message (export done,
// an error) or the newest line of the store's log, whichever came last.
type statusModel struct {
	styles *Styles
	w      int
	text   string
	isErr  bool
	logN   int
	logTop string
}

func newStatus(st *Styles) statusModel { return statusModel{styles: st} }

func (m *statusModel) SetSize(w, _ int) { m.w = w }

// Set shows a message; errors are drawn in red and stay until replaced.
// Messages quote paths and peers' errors, so they are made printable.
func (m *statusModel) Set(text string, isErr bool) { m.text, m.isErr = printable.Clean(text), isErr }

// SetLogs shows the store's newest log line when one has arrived since the
// last call.
func (m *statusModel) SetLogs(logs []string) {
	if len(logs) == 0 {
		return
	}
	top := logs[len(logs)-1]
	if len(logs) == m.logN && top == m.logTop {
		return
	}
	m.logN, m.logTop = len(logs), top
	m.text, m.isErr = top, false
}

func (m *statusModel) View() string {
	if m.text == "" {
		return ""
	}
	s := m.styles.Status
	if m.isErr {
		s = m.styles.StatusError
	}
	return s.Render(truncate(m.text, m.w))
}
