package ui

import "charm.land/bubbles/v2/key"

// KeyMap lists every key the UI reacts to; bubbles/help draws the help line
// and the full help from it.
type KeyMap struct {
	Snapshot   key.Binding
	EndRow     key.Binding
	RowUp      key.Binding
	RowDown    key.Binding
	Export     key.Binding
	Holders    key.Binding
	Dump       key.Binding
	DumpInfo   key.Binding
	Up         key.Binding
	Down       key.Binding
	NextDevice key.Binding
	PrevDevice key.Binding
	ZoomIn     key.Binding
	ZoomOut    key.Binding
	Pause      key.Binding
	Back       key.Binding
	Forward    key.Binding
	Start      key.Binding
	End        key.Binding
	Slower     key.Binding
	Faster     key.Binding
	Help       key.Binding
	Quit       key.Binding

	// prompt
	Confirm key.Binding
	Cancel  key.Binding
}

// DefaultKeyMap returns the bindings; replay enables the speed keys.
func DefaultKeyMap(replay bool) KeyMap {
	k := KeyMap{
		Snapshot:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "snapshot")),
		EndRow:     key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "check: end row + verdict")),
		RowUp:      key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "prev snapshot row")),
		RowDown:    key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "next snapshot row")),
		Export:     key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "export CSV")),
		Holders:    key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "holders")),
		Dump:       key.NewBinding(key.WithKeys("M"), key.WithHelp("M", "dump memory")),
		DumpInfo:   key.NewBinding(key.WithKeys("I"), key.WithHelp("I", "dump info")),
		Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "prev process")),
		Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "next process")),
		NextDevice: key.NewBinding(key.WithKeys("tab", "d"), key.WithHelp("tab/d", "next GPU")),
		PrevDevice: key.NewBinding(key.WithKeys("shift+tab", "D"), key.WithHelp("shift+tab", "prev GPU")),
		ZoomIn:     key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "zoom in")),
		ZoomOut:    key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "zoom out")),
		Pause:      key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "pause")),
		Back:       key.NewBinding(key.WithKeys("left"), key.WithHelp("←", "back 10%")),
		Forward:    key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "forward 10%")),
		Start:      key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "to start")),
		End:        key.NewBinding(key.WithKeys("end"), key.WithHelp("end", "to end / live")),
		Slower:     key.NewBinding(key.WithKeys("[", "<"), key.WithHelp("[", "slower")),
		Faster:     key.NewBinding(key.WithKeys("]", ">"), key.WithHelp("]", "faster")),
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Confirm:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "record")),
		Cancel:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	}
	k.Slower.SetEnabled(replay)
	k.Faster.SetEnabled(replay)
	if replay {
		k.Pause.SetHelp("space", "play/pause")
	}
	return k
}

// ShortHelp is the one-line help.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Snapshot, k.Export, k.Holders, k.ZoomIn, k.ZoomOut, k.Pause, k.NextDevice, k.Faster, k.Help, k.Quit}
}

// FullHelp is the help shown by ?.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Snapshot, k.EndRow, k.Export, k.Holders, k.RowUp, k.RowDown},
		{k.Up, k.Down, k.NextDevice, k.PrevDevice, k.Dump, k.DumpInfo},
		{k.ZoomIn, k.ZoomOut, k.Pause, k.Back, k.Forward},
		{k.Start, k.End, k.Slower, k.Faster},
		{k.Help, k.Quit},
	}
}

// promptKeys is the help shown while the label prompt is open.
type promptKeys struct{ k KeyMap }

func (p promptKeys) ShortHelp() []key.Binding  { return []key.Binding{p.k.Confirm, p.k.Cancel} }
func (p promptKeys) FullHelp() [][]key.Binding { return [][]key.Binding{p.ShortHelp()} }
