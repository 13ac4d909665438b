package ui

import "github.com/gputop/gputop/printable"

// statusModel is the status line: the UI's own last message (export done,
// an error) or the newest line of the log (Options.Log), whichever came last.
type statusModel struct {
	styles *Styles
	w      int
	text   string
	isErr  bool
	logN   uint64
}

func newStatus(st *Styles) statusModel { return statusModel{styles: st} }

func (m *statusModel) SetSize(w, _ int) { m.w = w }

// Set shows a message; errors are drawn in red and stay until replaced.
// Messages quote paths and peers' errors, so they are made printable.
func (m *statusModel) Set(text string, isErr bool) { m.text, m.isErr = printable.Clean(text), isErr }

// SetLog shows the log's newest line when one has arrived since the last
// call (count is how many lines the log has ever had).
func (m *statusModel) SetLog(count uint64, line string) {
	if count == 0 || count == m.logN {
		return
	}
	m.logN = count
	m.text, m.isErr = line, false
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
