package ui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/printable"
)

// Command is the command of `gputop run` as the output pane sees it; main
// fills it (the UI never touches the process itself).
type Command struct {
	Name      string                                        // the command line, for the pane's title
	Lines     func(back, n int) (lines []string, total int) // n lines of output ending back lines before the newest, already printable
	Gen       func() uint64                                 // moves when output arrives
	Ended     func() (done bool, how string)                // whether the command ended, and how ("exited with code 1"), else its state
	Interrupt func() error                                  // Ctrl-C: SIGINT to the command's foreground process group
	Resize    func(cols, rows int)                          // the size of the pane's text area, for the command's terminal
}

// runModel is the TUI of `gputop run`: the Model above, the command's
// output pane below it. The pane's keys (keys.go: inOutput, inRunning)
// come before the Model's, and take the first Ctrl-C for the command.
type runModel struct {
	inner       Model
	cmd         Command
	w, h        int
	show        bool // the pane's text is shown (else only its title line)
	back        int  // lines scrolled back from the newest
	interrupted bool // the command got a Ctrl-C from us
	note        string
	seen        uint64 // output generation last drawn
	pane        string
	rows        int // text rows of the pane as last laid out
}

// NewRun returns the program's model for `gputop run`.
func NewRun(inner Model, c Command) tea.Model {
	return &runModel{inner: inner, cmd: c, show: true}
}

// typing: the Model's prompt is open, so keys are text for it.
func (m Model) typing() bool { return m.prompt.open }

func (r *runModel) Init() tea.Cmd { return r.inner.Init() }

// paneRows is how many text rows the pane gets at height h.
func (r *runModel) paneRows() int {
	if !r.show || r.h < MinHeight+4 {
		return 0
	}
	return max(r.h/3, 3)
}

func (r *runModel) resize() tea.Cmd {
	r.rows = r.paneRows()
	if r.cmd.Resize != nil && r.rows > 0 {
		r.cmd.Resize(r.w, r.rows)
	}
	r.clampBack()
	return r.forward(tea.WindowSizeMsg{Width: r.w, Height: max(r.h-1-r.rows, 0)})
}

func (r *runModel) forward(msg tea.Msg) tea.Cmd {
	nm, cmd := r.inner.Update(msg)
	r.inner = nm.(Model)
	return cmd
}

func (r *runModel) clampBack() {
	_, total := r.cmd.Lines(0, 0)
	r.back = max(min(r.back, total-r.rows), 0)
}

func (r *runModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		r.w, r.h = msg.Width, msg.Height
		return r, r.resize()
	case tea.KeyPressMsg:
		if a := r.inner.keys.lookup(r.keyMode(), msg); a != nil {
			return r, a.run(r)
		}
	}
	return r, r.forward(msg)
}

// paneMode is the output pane's mode: shown or folded.
func (r *runModel) paneMode() keyMode {
	if r.show {
		return inOutput
	}
	return inOutputHidden
}

// keyMode is where keys act on the pane: nowhere while the Model's prompt
// is open (they are text there); Ctrl-C only while the command runs and
// has not had one from us.
func (r *runModel) keyMode() keyMode {
	if r.inner.typing() {
		return 0
	}
	mode := r.paneMode()
	if done, _ := r.cmd.Ended(); !done && !r.interrupted {
		mode |= inRunning
	}
	return mode
}

func (r *runModel) interrupt() tea.Cmd {
	r.interrupted = true
	r.note = "Ctrl-C sent to the command; Ctrl-C again quits gputop"
	if err := r.cmd.Interrupt(); err != nil {
		r.note = "could not send Ctrl-C to the command: " + err.Error() + "; Ctrl-C again quits gputop"
	}
	return nil
}

func (r *runModel) toggleOutput() tea.Cmd {
	r.show = !r.show
	return r.resize()
}

func (r *runModel) scrollBack() tea.Cmd {
	r.back++
	r.clampBack()
	return nil
}

func (r *runModel) scrollForward() tea.Cmd {
	r.back = max(r.back-1, 0)
	return nil
}

// keyHint is the title's keys: the pane's key bar, and quit once the
// command has ended.
func (r *runModel) keyHint(done bool) string {
	var items []string
	for _, b := range r.inner.keys.bar(r.paneMode()) {
		items = append(items, b.Help().Key+" "+b.Help().Desc)
	}
	if done {
		q := r.inner.keys.binding("quit").Help()
		items = append(items, q.Key+" "+q.Desc)
	}
	return strings.Join(items, " · ")
}

func (r *runModel) View() tea.View {
	v := r.inner.View()
	if r.w <= 0 || r.h <= 0 || r.h < MinHeight+1 {
		return v
	}
	v.Content += "\n" + r.drawPane()
	return v
}

// drawPane is the title line (the command, how it is doing, the keys)
// and, when shown, its output, newest at the bottom unless scrolled back.
func (r *runModel) drawPane() string {
	st := r.inner.styles
	done, how := r.cmd.Ended()
	state := st.Dim.Render(how)
	if done {
		state = st.Bold.Render(how)
		if !strings.HasSuffix(how, " code 0") {
			state = st.Error.Render(how)
		}
	}
	keys := r.keyHint(done)
	// the state first: a long command line is what gets cut
	title := st.Title.Render("output") + " " + state
	if r.back > 0 {
		title += st.Dim.Render(" (scrolled back)")
	}
	if r.note != "" && !done {
		title += " " + st.Warn.Render(r.note)
	}
	title += "  " + st.Dim.Render(keys) + "  " + st.Bold.Render(printable.Clean(r.cmd.Name))
	if r.rows == 0 {
		return fit(title, r.w, 1)
	}
	lines, _ := r.cmd.Lines(r.back, r.rows)
	for len(lines) < r.rows {
		lines = append(lines, "")
	}
	body := lipgloss.NewStyle().Render(strings.Join(lines, "\n"))
	return fit(title+"\n"+body, r.w, r.rows+1)
}
