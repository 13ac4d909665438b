package ui

import (
	"strconv"

	"github.com/gputop/gputop/view"
)

// agentCell is the process pane's AGENT cell: the agent's state, and
// whether it records torch's allocation history (so that a dump, `D`,
// shows who allocated each block).
func agentCell(r view.Process) string {
	switch {
	case r.History > 0:
		return r.Status + ", history " + strconv.Itoa(r.History)
	case r.HistoryError != "":
		return r.Status + ", no history"
	}
	return r.Status
}
