package ui

import (
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// promptModel is the snapshot label prompt (bubbles/textinput); Enter and
// Esc are the key table's (keys.go), the rest edits the label.
type promptModel struct {
	styles *Styles
	w      int
	input  textinput.Model
	open   bool
	def    string
}

func newPrompt(st *Styles) promptModel {
	in := textinput.New()
	in.Prompt = "snapshot label: "
	in.CharLimit = 120
	s := in.Styles()
	s.Focused.Prompt = st.Prompt
	s.Blurred.Prompt = st.Prompt
	s.Cursor.Blink = false // a steady cursor: no blink timer redrawing the screen
	in.SetStyles(s)
	return promptModel{styles: st, input: in}
}

func (m *promptModel) SetSize(w, h int) {
	m.w = w
	m.input.SetWidth(max(w-len(m.input.Prompt)-2, 4))
}

// Open shows the prompt prefilled with def.
func (m *promptModel) Open(def string) tea.Cmd {
	m.open, m.def = true, def
	m.input.SetValue(def)
	m.input.CursorEnd()
	return m.input.Focus()
}

func (m *promptModel) close() {
	m.open = false
	m.input.Blur()
}

// Update edits the label while open.
func (m promptModel) Update(msg tea.Msg) (promptModel, tea.Cmd) {
	if !m.open {
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// confirm closes the prompt and returns its label (an empty one falls back
// to the default); the root records the snapshot in the same Update, so
// the row shows in the next frame.
func (m *promptModel) confirm() string {
	label := strings.TrimSpace(m.input.Value())
	if label == "" {
		label = m.def
	}
	m.close()
	return label
}

func (m *promptModel) View() string {
	if !m.open {
		return ""
	}
	return fit(m.input.View(), m.w, 1)
}
