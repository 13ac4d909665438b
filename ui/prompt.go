package ui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// promptModel is the snapshot label prompt (bubbles/textinput).
type promptModel struct {
	styles *Styles
	keys   *KeyMap
	w      int
	input  textinput.Model
	open   bool
	def    string
	done   *string // confirmed label, until Take
}

func newPrompt(st *Styles, k *KeyMap) promptModel {
	in := textinput.New()
	in.Prompt = "snapshot label: "
	in.CharLimit = 120
	s := in.Styles()
	s.Focused.Prompt = st.Prompt
	s.Blurred.Prompt = st.Prompt
	s.Cursor.Blink = false // a steady cursor: no blink timer redrawing the screen
	in.SetStyles(s)
	return promptModel{styles: st, keys: k, input: in}
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

// Update handles keys while open: Enter confirms (an empty label falls back
// to the default), Esc cancels, the rest edits the label.
func (m promptModel) Update(msg tea.Msg) (promptModel, tea.Cmd) {
	if !m.open {
		return m, nil
	}
	if k, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case key.Matches(k, m.keys.Confirm):
			label := strings.TrimSpace(m.input.Value())
			if label == "" {
				label = m.def
			}
			m.close()
			m.done = &label
			return m, nil
		case key.Matches(k, m.keys.Cancel):
			m.close()
			return m, nil
		}
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// Take returns the label confirmed by the last Update, once; the root
// records the snapshot in the same Update, so the row shows in the next frame.
func (m *promptModel) Take() (string, bool) {
	if m.done == nil {
		return "", false
	}
	l := *m.done
	m.done = nil
	return l, true
}

func (m *promptModel) View() string {
	if !m.open {
		return ""
	}
	return fit(m.input.View(), m.w, 1)
}
