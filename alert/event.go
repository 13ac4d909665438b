// What an alert command is given: the event as JSON on its standard
// input, and a few environment variables.

package alert

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Event kinds.
const (
	KindForecast = "forecast" // a forecast fell under --alert-steps or --alert-within
	KindOOM      = "oom"      // a CUDA out-of-memory error
	KindVerdict  = "verdict"  // an end row's verdict is ✗
)

// Event is one alert: the JSON an alert command reads on its standard
// input. PID is the process's own pid (0: a row of no agent process),
// Process the pid as gputop shows it ("node1:1234" for a remote host's,
// "ns3:1" for one in a pid namespace gputop cannot see); Device is
// gputop's GPU index. Message is the event in one line, as gputop's log
// writes it. Forecast, OOM or Verdict holds the kind's figures.
type Event struct {
	Event    string         `json:"event"`
	T        int64          `json:"t"`
	Time     string         `json:"time"`
	PID      int            `json:"pid"`
	Process  string         `json:"process"`
	Host     string         `json:"host,omitempty"`
	Device   int            `json:"device"`
	GPU      string         `json:"gpu,omitempty"`
	UUID     string         `json:"uuid,omitempty"`
	Message  string         `json:"message"`
	Forecast *ForecastEvent `json:"forecast,omitempty"`
	OOM      *OOMEvent      `json:"oom,omitempty"`
	Verdict  *VerdictEvent  `json:"verdict,omitempty"`
}

// ForecastEvent is a forecast that fell under a threshold. In is the
// units (steps, epochs or seconds) to the OOM at the present growth, Low
// and High its range; At is the unit count now (the newest step row's
// step), so At+In is the step of the OOM; Seconds the time to it when
// known.
type ForecastEvent struct {
	Unit        string  `json:"unit"`
	In          float64 `json:"in"`
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	At          float64 `json:"at"`
	Seconds     float64 `json:"seconds,omitempty"`
	GrowthBytes float64 `json:"growth_bytes"`
	LimitBytes  uint64  `json:"limit_bytes"`
	Limit       string  `json:"limit"`
	Cause       string  `json:"cause"`
	Text        string  `json:"text"`
}

// OOMEvent is an out-of-memory error as torch's OOM observer reported it.
type OOMEvent struct {
	Requested uint64 `json:"requested_bytes,omitempty"`
	Free      uint64 `json:"free_bytes,omitempty"`
	Limit     uint64 `json:"limit_bytes,omitempty"`
	Allocated uint64 `json:"allocated_bytes"`
	Reserved  uint64 `json:"reserved_bytes"`
}

// VerdictEvent is an end row's ✗ verdict.
type VerdictEvent struct {
	Label string `json:"label"`
	Mark  string `json:"mark"`
	Text  string `json:"text"`
	Basis string `json:"basis"`
}

// env is the event as environment variables, for a command that needs no
// JSON.
func (e *Event) env() []string {
	return []string{
		"GPUTOP_EVENT=" + e.Event,
		"GPUTOP_PID=" + strconv.Itoa(e.PID),
		"GPUTOP_PROCESS=" + e.Process,
		"GPUTOP_DEVICE=" + strconv.Itoa(e.Device),
		"GPUTOP_MESSAGE=" + e.Message,
	}
}

// who is the event's process and GPU as the log says them: "pid 1234 on
// GPU 0".
func (e *Event) who() string {
	if e.PID == 0 {
		return fmt.Sprintf("GPU %d", e.Device)
	}
	return fmt.Sprintf("pid %s on GPU %d", e.Process, e.Device)
}

// newEvent is an event of kind about process pid (a store key; 0: none)
// on store device dev at t.
func newEvent(st *store.Store, devs []store.Device, kind string, pid, dev int, t int64) Event {
	e := Event{Event: kind, T: t, Time: time.Unix(0, t).UTC().Format(time.RFC3339Nano), Device: dev}
	if pid != 0 {
		_, e.PID = store.SplitPID(pid) // its own (a namespace-local key's: the pid it gave)
		e.Process = st.PIDLabel(pid)
	}
	if dev >= 0 && dev < len(devs) {
		e.GPU, e.UUID, e.Host = devs[dev].Name, devs[dev].UUID, devs[dev].Host
	}
	return e
}

// forecastEvent is the event of a process's forecast.
func forecastEvent(st *store.Store, devs []store.Device, p forecast.Process, t int64) Event {
	e := newEvent(st, devs, KindForecast, p.PID, p.Dev, t)
	f := p.Forecast
	unit := map[forecast.Unit]string{forecast.Steps: "steps", forecast.Epochs: "epochs", forecast.Seconds: "seconds"}[f.Unit]
	fe := &ForecastEvent{Unit: unit, In: f.In, Low: f.InLo, High: f.InHi, At: f.Last, GrowthBytes: f.Growth,
		LimitBytes: f.Limit, Limit: f.LimitFrom, Cause: f.CauseText(), Text: f.Text()}
	if f.Unit == forecast.Seconds {
		fe.At = 0 // seconds since its first window: no count of the run's
	}
	if s, ok := f.SecondsToOOM(); ok {
		fe.Seconds = s
	}
	e.Forecast = fe
	e.Message = e.who() + ": " + f.Head() + "; cause: " + f.CauseText()
	return e
}

// oomEvent is the event of an OOM row.
func oomEvent(st *store.Store, devs []store.Device, r wire.Row) Event {
	e := newEvent(st, devs, KindOOM, r.PID, r.Dev, r.T)
	oe := &OOMEvent{}
	if r.Allocated != nil {
		oe.Allocated = *r.Allocated
	}
	if r.Reserved != nil {
		oe.Reserved = *r.Reserved
	}
	msg := e.who() + ": CUDA out of memory"
	if o := r.OOM; o != nil {
		oe.Requested, oe.Free, oe.Limit = o.Requested, o.Free, o.Limit
		if o.Requested > 0 {
			msg += ", asking for " + units.Bytes(o.Requested)
		}
	}
	msg += " with " + units.Bytes(oe.Allocated) + " allocated and " + units.Bytes(oe.Reserved) + " reserved by torch"
	if oe.Limit > 0 {
		msg += " (its limit " + units.Bytes(oe.Limit) + ")"
	}
	e.OOM, e.Message = oe, msg
	return e
}

// verdictEvent is the event of an end row's ✗ verdict v.
func verdictEvent(st *store.Store, devs []store.Device, r wire.Row, v summary.Verdict) Event {
	e := newEvent(st, devs, KindVerdict, r.PID, r.Dev, r.T)
	e.Verdict = &VerdictEvent{Label: r.Label, Mark: v.Status.Mark(), Text: v.Text, Basis: v.Basis}
	e.Message = e.who() + ": " + v.Line()
	return e
}
