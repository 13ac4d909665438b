// The key table: each key, where it acts, what the help and the key bar
// call it, what it does, and the docs' line for it. The help (?), the
// key bar, the output pane's title and docs/keys.md's key tables are all
// drawn from it.

package ui

//go:generate go test -run TestKeysDocIsCurrent -update-keys-doc .

import (
	"math"
	"slices"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// keyMode is where a key acts: one bit each, so an entry can act in
// several. The full help (?) is no mode of its own: every key acts under it.
type keyMode uint16

const (
	inScreen       keyMode = 1 << iota // the screen
	inLabel                            // the label prompt of s and c: keys not bound here are the label's text
	inRename                           // the prompt renaming a row (r)
	inDelete                           // the prompt asking before a row is deleted (x)
	inTiny                             // the terminal is below MinWidth×MinHeight: nothing on it to act on
	inOutput                           // gputop run: its output pane, shown; ahead of the screen's keys, not while a prompt is open
	inOutputHidden                     // gputop run: the output pane folded to its title line
	inRunning                          // gputop run: its command runs and has had no Ctrl-C from gputop
	inLoading                          // a recording is being loaded

	inPrompt = inLabel | inRename | inDelete
	inRun    = inOutput | inOutputHidden | inRunning
)

// session says whether an entry acts live, in replay, or both (0).
type session uint8

const (
	liveOnly session = 1 + iota
	replayOnly
)

// keyAction is one entry of the table: what k9s calls a key action and
// lazygit a binding.
type keyAction struct {
	name  string   // one word, unique: how code and tests name the entry
	mode  keyMode  // where it acts
	only  session  // live or replay only; 0 both
	keys  []string // as tea.KeyPressMsg's String names them
	label string   // the keys as the help and the bar show them; "" is keys[0]
	help  string   // what the help and the bar say it does
	bar   int      // its place in its mode's key bar, 1 first; a narrow bar drops the last first; 0 not there
	// always: the screen's key bar ends with it at every width
	always bool
	// live: the key needs a live process; in a replay it does nothing
	// but say this in the status line, and leaves the key bar and the
	// help (docs/keys.md says so of it, keysdoc_test.go)
	live string
	// doc is its line in docs/keys.md's key table; "" shares the line of the
	// entry before (r beside x, d beside D)
	doc string
	// what it does: do acts on the screen's model, run on gputop run's
	// output pane around it. The loading screen's one key quits: it has
	// no model to act on yet, and nothing to write.
	do  func(*Model) tea.Cmd
	run func(*runModel) tea.Cmd
}

func keys(k ...string) []string { return k }

// keyTable is every key. The screen's entries are in the order of the
// full help.
var keyTable = []keyAction{
	{name: "snapshot", mode: inScreen, keys: keys("s"), help: "snapshot", bar: 1,
		live: "a replay takes no snapshot: s asks live processes for their rows",
		do:   func(m *Model) tea.Cmd { return m.openLabel(false) },
		doc:  "snapshot: a label prompt prefilled `snapshot N`; Enter records (one row per agent process on the GPU), Esc cancels; a label such as `After cleanup` makes an end row"},
	{name: "endrow", mode: inScreen, keys: keys("c"), help: "check: end row + verdict",
		live: "a replay takes no end row: c asks live processes for their rows and holders",
		do:   func(m *Model) tea.Cmd { return m.openLabel(true) },
		doc:  "check: an end row (prompt prefilled `After cleanup`); each agent process on the GPU is asked for a holders walk and its row gets the verdict when the answer comes"},
	{name: "export", mode: inScreen, keys: keys("e"), help: "export CSV", bar: 2,
		do:  (*Model).exportKey,
		doc: "write the summary CSV (`--csv PATH`, else `./gputop-summary-YYYYmmdd-HHMMSS.csv`); the path or the error is shown in the status line"},
	{name: "holders", mode: inScreen, keys: keys("h"), help: "holders", bar: 3,
		do:  func(m *Model) tea.Cmd { return m.toggleHolders(m.now()) },
		doc: "holders pane for the selected process (asks its agent for a fresh report)"},
	{name: "rename", mode: inScreen, keys: keys("r"), help: "rename row",
		do:  (*Model).startRename,
		doc: "rename / delete the selected row (a prompt on its label / asking first); its marker follows, the deltas and verdicts are worked out again from the rows left, the CSV has the new label and not the deleted row, and a recording made by the TUI (`--record`) holds the edit (`row_edit`, recording/FORMAT.md), so its replay and export show the rows as you left them"},
	{name: "delete", mode: inScreen, keys: keys("x"), help: "delete row",
		do: (*Model).startDelete},
	{name: "focus", mode: inScreen, keys: keys("tab", "shift+tab"), help: "processes ⇄ rows",
		do:  func(m *Model) tea.Cmd { m.switchFocus(); return nil },
		doc: "the focus: the processes ⇄ the rows (the focused pane's first column is marked `▸`; the rows start at the newest; leaving them, the table follows new rows again)"},
	{name: "up", mode: inScreen, keys: keys("up", "k"), label: "↑/k", help: "prev process / row",
		do:  func(m *Model) tea.Cmd { m.moveFocused(-1); return nil },
		doc: "move the focused pane's selection: a row, a page, the first, the last. A process: the chart's allocator series follow it. A row: the table scrolls to it, and under the table it is named in full with its time and pid, an end row's holders (`held by optimizer (Adam) 1.25 GiB, …`) and verdict, an OOM row's explanation, its ledger (a stacked bar of what the process's memory was made of, each part's figure and what it is based on; see \"What the memory is made of\"), the peak since the process's previous row broken down, and the advice from them"},
	{name: "down", mode: inScreen, keys: keys("down", "j"), label: "↓/j", help: "next process / row",
		do: func(m *Model) tea.Cmd { m.moveFocused(1); return nil }},
	{name: "pageup", mode: inScreen, keys: keys("pgup"), help: "page up (focused pane)",
		do: func(m *Model) tea.Cmd { m.moveFocused(-m.page()); return nil }},
	{name: "pagedown", mode: inScreen, keys: keys("pgdown"), label: "pgdn", help: "page down (focused pane)",
		do: func(m *Model) tea.Cmd { m.moveFocused(m.page()); return nil }},
	{name: "first", mode: inScreen, keys: keys("g"), help: "first row (focused pane)",
		do: func(m *Model) tea.Cmd { m.moveFocused(math.MinInt32); return nil }},
	{name: "last", mode: inScreen, keys: keys("G"), help: "last row (focused pane)",
		do: func(m *Model) tea.Cmd { m.moveFocused(math.MaxInt32); return nil }},
	{name: "sort", mode: inScreen, keys: keys("o"), help: "sort processes",
		do:  func(m *Model) tea.Cmd { m.sortProcs(); return nil },
		doc: "sort the processes: by pid (▲), NVML used (▼), allocated (▼), in turn; the sorted column's title has the arrow"},
	{name: "nextgpu", mode: inScreen, keys: keys("d"), help: "next GPU", bar: 7,
		do:  func(m *Model) tea.Cmd { m.stepDevice(1); return nil },
		doc: "next / previous GPU"},
	{name: "prevgpu", mode: inScreen, keys: keys("D"), help: "prev GPU",
		do: func(m *Model) tea.Cmd { m.stepDevice(-1); return nil }},
	{name: "zoomin", mode: inScreen, keys: keys("+", "="), help: "zoom in", bar: 4,
		do:  func(m *Model) tea.Cmd { m.tl.zoomIn(m.intoRun()); return nil },
		doc: "zoom the time window: 10 s, 30 s, 1 m, 5 m, 15 m, 1 h, whole run"},
	{name: "zoomout", mode: inScreen, keys: keys("-", "_"), help: "zoom out", bar: 5,
		do: func(m *Model) tea.Cmd { m.tl.zoomOut(m.intoRun()); return nil }},
	{name: "pause", mode: inScreen, only: liveOnly, keys: keys("space"), help: "pause", bar: 6,
		do:  func(m *Model) tea.Cmd { m.tl.togglePause(m.span()); return nil },
		doc: "pause / resume (replay: play / pause)"},
	{name: "play", mode: inScreen, only: replayOnly, keys: keys("space"), help: "play/pause", bar: 1, // a replay's first key (s is live only)
		do: func(m *Model) tea.Cmd { m.tl.togglePause(m.span()); return nil }},
	{name: "back", mode: inScreen, keys: keys("left"), label: "←", help: "back a tenth of the window",
		do:  func(m *Model) tea.Cmd { m.seekBy(-0.1); return nil },
		doc: "seek by a tenth of the window at every zoom (in the whole-run window, a tenth of the run: ten presses cross it); start; end (live: back to live)"},
	{name: "forward", mode: inScreen, keys: keys("right"), label: "→", help: "forward a tenth",
		do: func(m *Model) tea.Cmd { m.seekBy(0.1); return nil }},
	{name: "start", mode: inScreen, keys: keys("home"), help: "to start",
		do: func(m *Model) tea.Cmd { m.tl.home(m.span()); return nil }},
	{name: "end", mode: inScreen, keys: keys("end"), help: "to end / live",
		do: func(m *Model) tea.Cmd { m.tl.toEnd(m.now(), m.st.End()); return nil }},
	{name: "prevmarker", mode: inScreen, keys: keys("p"), help: "prev marker",
		do:  func(m *Model) tea.Cmd { m.jumpMarker(-1, m.now()); return nil },
		doc: "jump to the previous / next marker on the GPU (live: pausing there) and select its row"},
	{name: "nextmarker", mode: inScreen, keys: keys("n"), help: "next marker",
		do: func(m *Model) tea.Cmd { m.jumpMarker(1, m.now()); return nil }},
	{name: "slower", mode: inScreen, only: replayOnly, keys: keys("[", "<"), help: "slower",
		do:  func(m *Model) tea.Cmd { m.stepSpeed(-1); return nil },
		doc: "replay speed 0.25x … 16x (replay only)"},
	{name: "faster", mode: inScreen, only: replayOnly, keys: keys("]", ">"), help: "faster", bar: 8,
		do: func(m *Model) tea.Cmd { m.stepSpeed(1); return nil }},
	{name: "procs", mode: inScreen, keys: keys("1"), help: "hide processes", bar: 9,
		do:  func(m *Model) tea.Cmd { m.togglePane(paneProcs); return nil },
		doc: "hide / show the process pane / the summary pane (the chart takes their lines)"},
	{name: "table", mode: inScreen, keys: keys("2"), help: "hide summary", bar: 10,
		do: func(m *Model) tea.Cmd { m.togglePane(paneTable); return nil }},
	{name: "largestfree", mode: inScreen, keys: keys("L"), help: "chart largest free block",
		do:  (*Model).toggleLargestFree,
		doc: "show / hide the chart's largest free block in the selected process's cache (torch's allocator, read by its agent about once a second; off at the start): the most one request can take without new memory from the driver; the process pane gives its fragmentation = 1 − largest free block ÷ free in torch's cache"},
	{name: "ledgerview", mode: inScreen, keys: keys("b"), help: "chart ledger", bar: 11,
		do:  (*Model).toggleLedgerView,
		doc: "the chart's stacked view of the ledger and back: at each of the selected process's rows with a ledger, a bar of its parts (params at the bottom, then grads, optimizer state, activations, other tensors, workspaces, unattributed, cached free, outside torch) in the colours of the ledger under the table, and a legend giving each part's figure at the selected row (else the newest at the cursor); live and in replay"},
	{name: "dump", mode: inScreen, keys: keys("M"), help: "dump memory",
		live: "a replay takes no dump: M asks a live process's agent for one",
		do:   (*Model).askDump,
		doc:  "asks the selected process's agent for a memory dump (see \"Allocation history and dumps\"): a row labelled `dump` names the file"},
	{name: "dumpinfo", mode: inScreen, keys: keys("I"), help: "dump info",
		do:  (*Model).toggleDump,
		doc: "dump pane: `gputop dump-info` of the selected row's dump (else the GPU's latest one); `I` again closes it and cancels a read still running; a row from a remote host (`--ssh`) says which host holds the file instead of reading a path of this machine"},
	{name: "whole", mode: inScreen, keys: keys("enter"), help: "whole text",
		do:  func(m *Model) tea.Cmd { m.toggleWhole(); return nil },
		doc: "the text under the chart whole, wrapped to the width: the selected process's forecast, the run's peaks, the forecasts, the OOM explained, the verdicts, the selected row's details and ledger; in the place of the process pane and the summary (the chart gives it lines when they are too few; on a small terminal in pages: `enter` turns them, then closes). A pane too short for its text says so on its last line: `… N more lines (enter: whole text)`"},
	{name: "help", mode: inScreen, keys: keys("?"), help: "help", always: true,
		do:  func(m *Model) tea.Cmd { m.toggleHelp(); return nil },
		doc: "full help, in columns that fill the width (on a small terminal in pages: `?` turns them, then closes); the other keys still act under it"},
	{name: "quit", mode: inScreen | inTiny, keys: keys("q", "ctrl+c"), help: "quit", always: true,
		do:  (*Model).quitKey,
		doc: "quit (with `--csv`, writes the CSV first; if that fails the screen says why and a second quit leaves without writing)"},

	{name: "record", mode: inLabel, keys: keys("enter"), help: "record", bar: 1,
		do:  (*Model).confirmPrompt,
		doc: "record the row (an empty label takes the prefilled one); renaming a row: its new label"},
	{name: "renamed", mode: inRename, keys: keys("enter"), help: "rename", bar: 1,
		do: (*Model).confirmPrompt},
	{name: "deleted", mode: inDelete, keys: keys("y", "enter"), label: "y/enter", help: "delete", bar: 1,
		do:  (*Model).confirmPrompt,
		doc: "deleting a row: delete it"},
	{name: "cancel", mode: inLabel | inRename, keys: keys("esc"), help: "cancel", bar: 2,
		do:  (*Model).cancelPrompt,
		doc: "cancel: nothing is recorded or renamed"},
	{name: "kept", mode: inDelete, keys: keys("n", "esc"), label: "n/esc", help: "keep", bar: 2,
		do:  (*Model).cancelPrompt,
		doc: "deleting a row: keep it (other keys do nothing there)"},
	{name: "quitprompt", mode: inPrompt, keys: keys("ctrl+c"), help: "quit",
		do:  (*Model).quitKey,
		doc: "quit, as `q` does on the screen (`q` and `?` are text here)"},

	{name: "hideoutput", mode: inOutput, keys: keys("O"), help: "hide", bar: 1,
		run: (*runModel).toggleOutput,
		doc: "hide / show the command's output (its title line stays; `o` sorts the processes, as always)"},
	{name: "showoutput", mode: inOutputHidden, keys: keys("O"), help: "show output", bar: 1,
		run: (*runModel).toggleOutput},
	{name: "scrollback", mode: inOutput, keys: keys("K", "shift+up"), label: "K/J", help: "scroll", bar: 2,
		run: (*runModel).scrollBack,
		doc: "scroll the output back / forward a line"},
	// folded, K still scrolls, but the title names only O
	{name: "scrollbackfolded", mode: inOutputHidden, keys: keys("K", "shift+up"), help: "scroll back",
		run: (*runModel).scrollBack},
	{name: "scrollforward", mode: inOutput | inOutputHidden, keys: keys("J", "shift+down"), help: "scroll forward",
		run: (*runModel).scrollForward},
	{name: "interrupt", mode: inRunning, keys: keys("ctrl+c"), help: "Ctrl-C to the command",
		run: (*runModel).interrupt,
		doc: "the first goes to the command (SIGINT to its foreground process group); a second one, or one after the command ended, quits gputop"},

	{name: "quitloading", mode: inLoading, keys: keys("q", "ctrl+c"), help: "quit",
		doc: "give up and quit (nothing is written)"},
}

// keyMap is the key table as one session has it: the entries for live or
// replay, each with its binding. The help of 1 and 2 follows the state
// (hide or show).
type keyMap struct {
	acts   []keyAction
	bind   []key.Binding // acts[i]'s
	replay bool
}

// newKeyMap returns the entries of the table that act live (or in replay).
func newKeyMap(replay bool) *keyMap {
	k := keyMap{replay: replay}
	for _, a := range keyTable {
		if a.only == liveOnly && replay || a.only == replayOnly && !replay {
			continue
		}
		label := a.label
		if label == "" {
			label = a.keys[0]
		}
		if a.live != "" && replay {
			a.bar = 0
		}
		k.acts = append(k.acts, a)
		k.bind = append(k.bind, key.NewBinding(key.WithKeys(a.keys...), key.WithHelp(label, a.help)))
	}
	return &k
}

// lookup returns the entry that msg presses in mode, or nil.
func (k *keyMap) lookup(mode keyMode, msg tea.KeyPressMsg) *keyAction {
	for i := range k.acts {
		if k.acts[i].mode&mode != 0 && key.Matches(msg, k.bind[i]) {
			return &k.acts[i]
		}
	}
	return nil
}

// binding is the named entry's binding; it panics on a name the table
// lacks, a mistake of the code, found by the first test that draws it.
func (k *keyMap) binding(name string) *key.Binding {
	for i := range k.acts {
		if k.acts[i].name == name {
			return &k.bind[i]
		}
	}
	panic("ui: no key named " + name)
}

// setHelp changes what the help and the bar say the named entry does.
func (k *keyMap) setHelp(name, help string) {
	b := k.binding(name)
	b.SetHelp(b.Help().Key, help)
}

// bar is mode's key bar: its entries with a place, in order.
func (k *keyMap) bar(mode keyMode) []key.Binding {
	var idx []int
	for i, a := range k.acts {
		if a.mode&mode != 0 && a.bar > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return k.acts[a].bar - k.acts[b].bar })
	out := make([]key.Binding, len(idx))
	for j, i := range idx {
		out[j] = k.bind[i]
	}
	return out
}

// ShortHelp is the screen's key bar before Always: the most important
// first (a narrow bar drops them from the end).
func (k *keyMap) ShortHelp() []key.Binding { return k.bar(inScreen) }

// Always is what the screen's key bar shows at every width: help and quit.
func (k *keyMap) Always() []key.Binding {
	var out []key.Binding
	for i, a := range k.acts {
		if a.mode&inScreen != 0 && a.always {
			out = append(out, k.bind[i])
		}
	}
	return out
}

// FullHelp is the help shown by ?: the screen's keys in the table's order;
// in a replay, not those that need a live process.
func (k *keyMap) FullHelp() [][]key.Binding {
	var out []key.Binding
	for i, a := range k.acts {
		if a.mode&inScreen != 0 && !(k.replay && a.live != "") {
			out = append(out, k.bind[i])
		}
	}
	return [][]key.Binding{out}
}
