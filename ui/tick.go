// How often a frame tick comes: as often as what is drawn can change, not
// at a fixed frame rate. A tick that finds nothing changed draws nothing
// (refresh.go), but each one still wakes the program, so a paused replay,
// where nothing changes by the clock, is looked at once a second, and
// everything else four times a second: numbers cannot be read faster, the
// chart is redrawn at most every valueInterval, and a new row, marker or
// log line waits at most a quarter of a second.

package ui

import (
	"time"

	tea "charm.land/bubbletea/v2"
)

const (
	// pollEvery is the tick while anything can change by the clock: live
	// (samples arrive, also while paused: rows, agents, log lines) or a
	// replay playing (its cursor moves).
	pollEvery = 250 * time.Millisecond
	// idleEvery is the tick of a paused replay: its store is whole and
	// only a key changes the screen, but a log line may still come.
	idleEvery = time.Second
)

// frameTickMsg is a tick of the ticker numbered seq; one from a ticker
// replaced since is dropped, so that only one runs.
type frameTickMsg struct {
	seq int
	t   time.Time
}

// Stats count what the model did: ticks handled and frames drawn (the
// screen built again because something on it changed). gputop writes them
// at exit when asked (GPUTOP_FRAMESTATS), for the tests that hold a still
// screen to drawing nothing.
type Stats struct {
	Ticks  int
	Frames int
}

// Stats returns the counts so far.
func (m Model) Stats() Stats { return *m.stats }

// tickInterval is how long until the next tick can find something new.
func (m *Model) tickInterval() time.Duration {
	d := pollEvery
	if m.opt.Replay && m.tl.paused {
		d = idleEvery
	}
	return max(d, time.Second/time.Duration(m.opt.FPS))
}

func (m Model) tick() tea.Cmd {
	seq := m.tickSeq
	return tea.Tick(m.tickEvery, func(t time.Time) tea.Msg { return frameTickMsg{seq: seq, t: t} })
}

// rearm starts a faster ticker, beside cmd, when a key made the running
// one too slow (space on a paused replay); the slower one stops at its
// next tick.
func (m *Model) rearm(cmd tea.Cmd) tea.Cmd {
	d := m.tickInterval()
	if d >= m.tickEvery {
		return cmd
	}
	m.tickSeq++
	m.tickEvery = d
	return tea.Batch(cmd, m.tick())
}
