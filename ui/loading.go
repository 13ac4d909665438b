package ui

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
)

// Load is a recording being read into the store in the background.
type Load struct {
	Name     string                     // what is being loaded, for the screen
	Progress func() (read, total int64) // bytes read so far, and in all (0: unknown)
	Done     <-chan struct{}            // closed when the load has ended
	Status   func() string              // after Done: a line for the status bar (e.g. the file's format error), or ""
}

// loading is the screen while a Load runs: a progress line, and q or
// ctrl+c to give up (nothing is written then). When the load ends it hands
// the program over to the Model.
type loading struct {
	in     *ingest.Ingest
	opt    Options
	load   Load
	keys   *keyMap
	styles Styles
	w, h   int
	sized  bool
}

type loadTickMsg struct{}

type loadDoneMsg struct{}

// NewLoading returns the program's model while load fills in's store; the
// Model over in and opt follows once it is done.
func NewLoading(in *ingest.Ingest, opt Options, load Load) tea.Model {
	return loading{in: in, opt: opt, load: load, keys: newKeyMap(opt.Replay), styles: DefaultStyles()}
}

func (l loading) Init() tea.Cmd {
	done := l.load.Done
	return tea.Batch(l.tick(), func() tea.Msg { <-done; return loadDoneMsg{} })
}

func (l loading) tick() tea.Cmd {
	return tea.Tick(100*time.Millisecond, func(time.Time) tea.Msg { return loadTickMsg{} })
}

func (l loading) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		l.w, l.h, l.sized = msg.Width, msg.Height, true
	case tea.KeyPressMsg:
		if l.keys.lookup(inLoading, msg) != nil { // its one key: quit
			return l, tea.Quit
		}
	case loadTickMsg:
		return l, l.tick()
	case loadDoneMsg:
		opt := l.opt
		if l.load.Status != nil {
			opt.LoadErr = l.load.Status()
		}
		m := New(l.in, opt)
		cmds := []tea.Cmd{m.Init()}
		var next tea.Model = m
		if l.sized {
			var cmd tea.Cmd
			next, cmd = m.Update(tea.WindowSizeMsg{Width: l.w, Height: l.h})
			cmds = append(cmds, cmd)
		}
		return next, tea.Batch(cmds...)
	}
	return l, nil
}

func (l loading) View() tea.View {
	name := store.CleanText(l.load.Name)
	title := l.styles.Title.Render("gputop") + " " + l.styles.Bold.Render(name)
	v := tea.NewView(fit(title+"\n\n"+l.line(name), l.w, l.h)) // fit cuts each line to the width
	v.AltScreen = true
	v.WindowTitle = "gputop: loading " + name
	return v
}

// line says how far the load is: "loading run.gputop: 312.4 of 1024.0 MiB
// (30%); q quits".
func (l loading) line(name string) string {
	read, total := l.load.Progress()
	const mib = 1 << 20
	var b strings.Builder
	fmt.Fprintf(&b, "loading %s: %.1f", name, float64(read)/mib)
	if total > 0 {
		fmt.Fprintf(&b, " of %.1f MiB (%d%%)", float64(total)/mib, min(read*100/total, 100))
	} else {
		b.WriteString(" MiB")
	}
	b.WriteString("; q quits")
	return l.styles.Dim.Render(b.String())
}
