// The forecasts of the selected GPU's agent processes, kept between
// frames: each one reads a process's rows and series, so a screen asks
// for them again only when the rows or agents change, the GPU or the mode
// changes, or a second has passed (new samples live, the cursor moving
// in replay).

package present

import (
	"time"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
)

type forecastKey struct {
	dev          int
	rows, agents uint64
	sec          int64
	cursor       bool
}

type forecasts struct {
	key   forecastKey
	list  []forecast.Process
	valid bool
}

// get returns the forecasts of dev's agent processes for q.
func (c *forecasts) get(st *store.Store, q *Query, dev int) []forecast.Process {
	at := q.Now
	if q.atCursor() {
		at = q.Cursor
	}
	sh := st.Shape()
	k := forecastKey{dev: dev, rows: sh.Rows, agents: sh.Agents, sec: at / int64(time.Second), cursor: q.atCursor()}
	if !c.valid || c.key != k {
		c.key, c.list, c.valid = k, forecast.On(st, dev, at, !q.atCursor()), true
	}
	return c.list
}

// ForecastOf is the forecast of process pid on the screen's GPU, if it has
// one.
func (s *Screen) ForecastOf(pid int) (forecast.Process, bool) {
	for _, f := range s.Forecasts {
		if f.PID == pid {
			return f, true
		}
	}
	return forecast.Process{}, false
}
