// Renaming and deleting the selected row: the prompt asks, the
// store applies the edit (and its recorder, when recording, writes it), so
// the table, the chart's marker and the CSV all follow.

package ui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const snapshotPrompt = "snapshot label: "

// startRename opens the prompt on the selected row's label.
func (m *Model) startRename() tea.Cmd {
	r, ok := m.table.Selected()
	if !ok {
		m.status.Set("no row selected: tab to the rows, ↑/↓ to pick one, then r", true)
		return nil
	}
	m.edit = &wire.RowEdit{ID: r.ID, T: r.T, Dev: r.Dev, PID: r.PID, Label: r.Label}
	return m.openEditPrompt("rename row to: ", r.Label)
}

// startDelete asks before deleting the selected row.
func (m *Model) startDelete() tea.Cmd {
	r, ok := m.table.Selected()
	if !ok {
		m.status.Set("no row selected: tab to the rows, ↑/↓ to pick one, then x", true)
		return nil
	}
	m.edit = &wire.RowEdit{ID: r.ID, T: r.T, Dev: r.Dev, PID: r.PID, Label: r.Label, Delete: true}
	return m.openEditPrompt(fmt.Sprintf("delete row %q? y deletes it, n keeps it ", r.Label), "")
}

// openEditPrompt opens the prompt on m.edit; while it is open the keys
// act in its mode (keys.go: inRename or inDelete).
func (m *Model) openEditPrompt(prompt, value string) tea.Cmd {
	m.prompt.input.Prompt = prompt
	m.prompt.SetSize(m.w, 1)
	return m.prompt.Open(value)
}

// finishEdit applies the edit the prompt confirmed with text (the new
// label); false when the prompt was not editing a row.
func (m *Model) finishEdit(text string) bool {
	e := m.edit
	if e == nil {
		return false
	}
	if !e.Delete {
		if text == "" || text == e.Label {
			m.status.Set("label unchanged", false)
			return true
		}
		e.Rename = text
	}
	if len(m.in.Apply(0, *e)) == 0 {
		m.status.Set(fmt.Sprintf("row %q is no longer there", e.Label), true)
		return true
	}
	if e.Delete {
		m.status.Set(fmt.Sprintf("deleted row %q (the CSV and a recording leave it out)", e.Label), false)
	} else {
		m.status.Set(fmt.Sprintf("renamed row %q to %q", e.Label, store.CleanText(e.Rename)), false)
		m.table.pick = &rowPick{id: e.ID}
	}
	return true
}

// closeEdit puts the prompt back to taking snapshot labels.
func (m *Model) closeEdit() {
	m.edit = nil
	m.prompt.input.Prompt = snapshotPrompt
	m.prompt.SetSize(m.w, 1)
}
