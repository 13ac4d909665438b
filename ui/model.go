// Package ui is gputop's terminal interface: a Bubble Tea v2 program that
// redraws from the store when what it draws changed, checked a few times a
// second (never one message per sample).
// The root Model owns the layout and the keys; each pane (header, chart,
// processes, summary, holders, prompt, status) lives in its own file
// with its own SetSize and View.
package ui

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/logbook"
	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options configure the UI; main.go fills them.
type Options struct {
	Replay         bool                    // the store holds a whole recording; the UI plays it with a cursor
	Title          string                  // e.g. "demo: H200 MLP training" or the recording path
	CSVPath        string                  // --csv; "" means ./gputop-summary-YYYYmmdd-HHMMSS.csv on e
	FPS            int                     // at most this many frame ticks per second (default 30); the ticks themselves come only as often as what is drawn can change (tick.go)
	Now            func() time.Time        // clock; default time.Now
	RequestHolders func(pid int) error     // asks an agent for a holders report; nil when there is no agent server
	RequestDump    func(pid int) error     // asks an agent for a memory dump; nil when there is no agent server
	WriteCSV       func(path string) error // writes the summary CSV (e, and quit with CSVPath)
	LoadErr        string                  // e.g. a recording's format error, shown at start
	Log            *logbook.Book           // the status line shows its newest line; nil: none
	// OpenAt, in replay, is where the cursor starts, paused, with the whole
	// run in the window (the demo: present.StoryMoment); 0 is the start,
	// playing, or for a recording no longer than the default window its end
	OpenAt int64
}

// Minimum usable terminal; below it the UI shows a notice instead.
const (
	MinWidth  = 40
	MinHeight = 10
)

// tickMsg is a frame tick: the store and the clock looked at again.
type tickMsg time.Time

// csvMsg reports an export.
type csvMsg struct {
	path     string
	rows     int
	err      error
	quitting bool
}

// holdersAskedMsg reports whether a holders request reached the agent.
type holdersAskedMsg struct {
	pid int
	err error
}

// Model is the root Bubble Tea model.
type Model struct {
	in     *ingest.Ingest // the only way the UI changes the store: a snapshot, a row edited
	st     *store.Store   // in's store, read
	opt    Options
	keys   *keyMap // the key table for live or replay (keys.go)
	styles *Styles
	help   help.Model

	w, h int
	tl   timeline
	dev  int

	header  headerModel
	chart   chartModel
	procs   procsModel
	table   summaryModel
	holders holdersModel
	dump    dumpModel
	prompt  promptModel
	status  statusModel

	showHolders bool
	showDump    bool
	largestFree bool               // the chart shows the selected process's largest free block (L)
	ledgerView  bool               // the chart shows the selected process's rows' ledgers stacked (b)
	hidden      [numPanes]bool     // panes the user hid (1, 2) to give the chart their lines
	helpPage    int                // the page of the full help shown
	helpN       int                // how many pages the full help takes at this size
	helpText    string             // the full help's title and page, laid out for this size
	wholeOpen   bool               // the whole text takes the lower panes' place (whole.go)
	wholePage   int                // its page shown
	wholeN      int                // how many pages it takes at this size
	wholeText   string             // its title and page, laid out for this size
	bars        *barCache          // the key bar and the help's pages, kept while the size stays
	focus       focusPane          // the pane ↑/↓ act on (focus.go)
	edit        *wire.RowEdit      // the row the open prompt renames or deletes (rowedit.go)
	geo         *paneGeo           // where the last drawn screen put the panes (mouse.go)
	quitArmed   bool               // a write on quit failed; the next quit key quits anyway
	promptEnd   bool               // the open prompt takes an end row (c), not a snapshot (s)
	pres        *present.Presenter // the screen's data, joined from the store

	// what the last refresh was computed from, to skip identical frames
	lastGen          uint64
	lastFrom, lastTo int64
	lastShape        store.Shape
	logN             uint64 // the log's line count at the last refresh
	valuesAt         int64  // when values were last redrawn
	nRows            int

	// the screen is drawn again only when version moved: a frame where
	// nothing changed costs no drawing at all
	version int
	title   string
	titleK  titleKey // what title was made from
	frame   *frameCache

	tickSeq   int           // the ticker that counts: older ones stop (tick.go)
	tickEvery time.Duration // the running ticker's interval
	stats     *Stats
}

// New returns the root model over st.
func New(in *ingest.Ingest, opt Options) Model {
	st := in.Store()
	if opt.FPS <= 0 {
		opt.FPS = 30
	}
	// a recording's file name goes into the window title and the title bar,
	// a load error quotes it: printable like everything else from outside
	opt.Title, opt.LoadErr = printable.Clean(opt.Title), printable.Clean(opt.LoadErr)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	styles := DefaultStyles()
	h := help.New()
	h.Styles = styles.Help
	m := Model{
		in: in, st: st, opt: opt, keys: newKeyMap(opt.Replay), styles: &styles, help: h,
		tl:      newTimeline(opt.Replay, st.Start(), opt.Now().UnixNano()),
		header:  newHeader(&styles),
		chart:   newChart(&styles),
		procs:   newProcs(&styles),
		table:   newSummary(&styles),
		holders: newHolders(&styles),
		dump:    newDump(&styles),
		prompt:  newPrompt(&styles),
		status:  newStatus(&styles),
		frame:   &frameCache{},
		stats:   &Stats{},
		bars:    &barCache{},
		pres:    present.NewPresenter(),
		geo:     &paneGeo{},
	}
	switch {
	case opt.Replay && opt.OpenAt > 0:
		m.tl.openAt(opt.OpenAt)
	case opt.Replay && st.End()-st.Start() <= int64(zooms[defaultZoom]):
		// a recording shorter than the default window: all of it on
		// screen at once, paused at its end (space plays it from the start)
		m.tl.openAt(st.End())
	}
	m.tickEvery = m.tickInterval()
	m.status.SetLog(opt.Log.Last())
	if opt.LoadErr != "" {
		m.status.Set(opt.LoadErr, true)
	}
	return m
}

func (m *Model) now() int64 { return m.opt.Now().UnixNano() }

// Init starts the frame ticker.
func (m Model) Init() tea.Cmd { return m.tick() }

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if msg, ok := msg.(frameTickMsg); ok {
		if msg.seq != m.tickSeq {
			return m, nil // a ticker replaced by a faster one (tick.go)
		}
		return m.Update(tickMsg(msg.t))
	}
	if _, ok := msg.(tickMsg); ok {
		m.stats.Ticks++
		m.tl.advance(m.now(), m.st.End())
		k := m.titleKey()
		// live, a new minute on the clock redraws the values with it: one
		// full-screen frame instead of two
		changed := m.refresh(k != m.titleK && !m.opt.Replay)
		m.prerender()
		if k != m.titleK {
			m.titleK = k
			if title := m.titleBar(); title != m.title {
				m.title = title
				changed = true
			}
		}
		if changed {
			m.redraw()
		}
		m.tickEvery = m.tickInterval()
		return m, m.tick()
	}
	switch msg.(type) {
	case tea.MouseMotionMsg, tea.MouseReleaseMsg:
		return m, nil // a drag or a release changes nothing: no redraw
	}
	nm, cmd := m.update(msg)
	nm.titleK = nm.titleKey()
	nm.title = nm.titleBar()
	nm.version++
	return nm, nm.rearm(cmd)
}

func (m Model) update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.help.SetWidth(m.w)
		m.layout()
		m.refresh(true)
		m.prerender()
		return m, nil
	case csvMsg:
		if msg.err != nil {
			text := msg.err.Error() + " (every row is still here; try --csv with a writable path)"
			if msg.quitting {
				m.quitArmed = true
				text += "; press q again to quit without writing"
			}
			m.status.Set(text, true)
			return m, nil
		}
		m.status.Set(fmt.Sprintf("wrote %s (%s)", msg.path, plural(msg.rows, "row")), false)
		if msg.quitting {
			return m, tea.Quit
		}
		return m, nil
	case dumpAskedMsg, dumpReadMsg:
		m.onDump(msg)
		return m, nil
	case holdersAskedMsg:
		if msg.err != nil {
			m.holders.asking = 0
			m.status.Set(fmt.Sprintf("cannot ask pid %d for holders: %v", msg.pid, msg.err), true)
		}
		return m, nil
	case tea.KeyPressMsg:
		cmd := m.key(msg)
		m.refresh(true)
		m.prerender()
		return m, cmd
	case tea.MouseClickMsg, tea.MouseWheelMsg:
		m.mouse(msg.(tea.MouseMsg))
		m.refresh(true)
		m.prerender()
		return m, nil
	}
	if m.prompt.open && !m.tooSmall() {
		var cmd tea.Cmd
		m.prompt, cmd = m.prompt.Update(msg)
		return m, cmd
	}
	return m, nil
}
