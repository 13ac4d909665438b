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
	Procs      key.Binding // hide or show the process pane
	Table      key.Binding // hide or show the snapshot table
	Help       key.Binding
	Quit       key.Binding

	// the focused pane (processes or snapshot rows), sorting, row edits and
	// marker jumps (interact.go)
	Focus      key.Binding
	First      key.Binding
	Last       key.Binding
	Sort       key.Binding
	Rename     key.Binding
	Delete     key.Binding
	NextMarker key.Binding
	PrevMarker key.Binding

	// prompt
	Confirm key.Binding
	Cancel  key.Binding
}

// DefaultKeyMap returns the bindings; replay enables the speed keys.
func DefaultKeyMap(replay bool) KeyMap {
	k := KeyMap{
		Snapshot:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "snapshot")),
		EndRow:     key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "check: end row + verdict")),
		RowUp:      key.NewBinding(key.WithKeys("pgup"), key.WithHelp("pgup", "page up (focused pane)")),
		RowDown:    key.NewBinding(key.WithKeys("pgdown"), key.WithHelp("pgdn", "page down (focused pane)")),
		Export:     key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "export CSV")),
		Holders:    key.NewBinding(key.WithKeys("h"), key.WithHelp("h", "holders")),
		Dump:       key.NewBinding(key.WithKeys("M"), key.WithHelp("M", "dump memory")),
		DumpInfo:   key.NewBinding(key.WithKeys("I"), key.WithHelp("I", "dump info")),
		Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "prev process / row")),
		Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "next process / row")),
		NextDevice: key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "next GPU")),
		PrevDevice: key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "prev GPU")),
		ZoomIn:     key.NewBinding(key.WithKeys("+", "="), key.WithHelp("+", "zoom in")),
		ZoomOut:    key.NewBinding(key.WithKeys("-", "_"), key.WithHelp("-", "zoom out")),
		Pause:      key.NewBinding(key.WithKeys("space"), key.WithHelp("space", "pause")),
		Back:       key.NewBinding(key.WithKeys("left"), key.WithHelp("←", "back a tenth of the window")),
		Forward:    key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "forward a tenth")),
		Start:      key.NewBinding(key.WithKeys("home"), key.WithHelp("home", "to start")),
		End:        key.NewBinding(key.WithKeys("end"), key.WithHelp("end", "to end / live")),
		Slower:     key.NewBinding(key.WithKeys("[", "<"), key.WithHelp("[", "slower")),
		Faster:     key.NewBinding(key.WithKeys("]", ">"), key.WithHelp("]", "faster")),
		Procs:      key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "hide processes")),
		Table:      key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "hide snapshots")),
		Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:       key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Focus:      key.NewBinding(key.WithKeys("tab", "shift+tab"), key.WithHelp("tab", "processes ⇄ snapshot rows")),
		First:      key.NewBinding(key.WithKeys("g"), key.WithHelp("g", "first row (focused pane)")),
		Last:       key.NewBinding(key.WithKeys("G"), key.WithHelp("G", "last row (focused pane)")),
		Sort:       key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "sort processes")),
		Rename:     key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "rename row")),
		Delete:     key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "delete row")),
		NextMarker: key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "next marker")),
		PrevMarker: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "prev marker")),
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

// ShortHelp is the one-line help: the key bar's entries, most important
// first (a narrow bar drops them from the end), then Always.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Snapshot, k.Export, k.Holders, k.ZoomIn, k.ZoomOut, k.Pause, k.NextDevice, k.Faster, k.Procs, k.Table}
}

// Always is what the key bar shows at every width: help and quit.
func (k KeyMap) Always() []key.Binding { return []key.Binding{k.Help, k.Quit} }

// FullHelp is the help shown by ?.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Snapshot, k.EndRow, k.Export, k.Holders, k.Rename, k.Delete},
		{k.Focus, k.Up, k.Down, k.RowUp, k.RowDown, k.First, k.Last},
		{k.Sort, k.NextDevice, k.PrevDevice, k.ZoomIn, k.ZoomOut, k.Pause},
		{k.Back, k.Forward, k.Start, k.End, k.PrevMarker, k.NextMarker},
		{k.Slower, k.Faster, k.Procs, k.Table, k.Dump, k.DumpInfo},
		{k.Help, k.Quit},
	}
}
