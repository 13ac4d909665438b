package ui

import (
	"strconv"
	"time"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/summary"
)

// oomNote explains the selected device's latest out-of-memory error, in the
// words of summary.ExplainOOM: Head says when and what was asked for; Body
// gives the likely cause first, so a short pane keeps it, then what gputop
// suggests, then where the memory was.
type oomNote struct {
	Head, Body string
	// When is Head's "at 0:01:25.0 in pid 4242"; Short the note in a few
	// lines for a short pane (summary's OOMExplanation.Short), "" where
	// Head and Body are short already
	When, Short string
	T           int64 // the OOM row's time
	Selected    bool  // the OOM of the selected row
}

// latestOOM explains the latest OOM row of a device's rows (run start at
// start, the device's memory total, 0 when unknown); nil without one.
func latestOOM(d summary.DeviceRows, start int64, total uint64) *oomNote {
	if d.LatestOOM < 0 {
		return nil
	}
	return explainOOM(d.Rows[d.LatestOOM], start, total)
}

// explainOOM explains the OOM row r.
func explainOOM(r summary.Row, start int64, total uint64) *oomNote {
	o := *r.OOM
	e := summary.ExplainOOM(r, o, total)
	when := "at " + elapsed(time.Duration(r.T-start)) + " in pid " + strconv.Itoa(r.PID)
	head := when + ":"
	if e.Asked != "" {
		head += " " + e.Asked
	}
	return &oomNote{Head: head, Body: printable.Clean(e.Text()), When: when, Short: printable.Clean(e.Short), T: r.T}
}
