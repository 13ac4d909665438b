// Forecasts of a run that has ended, as text: for `gputop export` and
// `gputop run`'s summary, where no screen shows them.

package forecast

import (
	"fmt"
	"math"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Findings are a store's forecasts at its end: each agent process on each
// GPU, its forecast at its last point and, when it ran out of memory,
// what the forecast said just before its latest OOM against when the OOM
// came.
func Findings(st *store.Store) []string {
	end := st.End()
	devs := st.Devices()
	agents := map[int]*store.Agent{}
	as := st.Agents()
	for i := range as {
		agents[as[i].Hello.PID] = &as[i]
		if h := as[i].Holders; h != nil {
			end = max(end, h.T) // a walk after the last sample counts
		}
	}
	var out []string
	for _, p := range All(st, end, false) {
		name := ""
		if p.Dev < len(devs) {
			name = " (" + devs[p.Dev].Name + ")"
		}
		who := fmt.Sprintf("GPU %d%s, pid %s", p.Dev, name, p.Label)
		out = append(out, who+": forecast "+p.at()+": "+p.Text())
		if l := beforeOOM(st, agents[p.PID], p.Dev, end); l != "" {
			out = append(out, "  "+l)
		}
	}
	return out
}

// at says where a forecast was made: "at Step 480", "at Epoch 12", "at
// its end".
func (p Process) at() string {
	switch {
	case p.Status == NotEnough || p.Unit == Seconds:
		return "at its end"
	case p.Unit == Epochs:
		return "at Epoch " + thousands(p.Last)
	}
	return "at Step " + thousands(p.Last)
}

// beforeOOM is what the forecast of a's process on dev said just before
// its latest OOM up to end, and when the OOM came in the forecast's unit
// ("" when it had no OOM, or too little data before it).
func beforeOOM(st *store.Store, a *store.Agent, dev int, end int64) string {
	if a == nil {
		return ""
	}
	ooms := st.ProcessRows(a.Hello.PID, dev, end, 1, func(r *wire.Row) bool { return r.Source == wire.SourceOOM })
	if len(ooms) == 0 {
		return ""
	}
	t := ooms[0].T
	f := For(st, a, dev, t-1, false)
	if f.Status == NotEnough {
		return "" // it had nothing to say then
	}
	s := "before its OOM at " + time.Unix(0, t).UTC().Format("15:04:05") + " UTC the forecast said: " + f.Head()
	if f.Status != OOM || f.In < 0.5 {
		return s
	}
	came := float64(t-f.LastT) / 1e9 // seconds after the forecast's last point
	switch {
	case f.Unit == Seconds:
		return s + fmt.Sprintf("; it came %s after", Duration(came))
	case f.SecondsPer > 0:
		at := f.Last + came/f.SecondsPer
		off := (at - (f.Last + f.In)) / (f.Last + f.In) * 100
		return s + fmt.Sprintf(", near %s %s; it came near %s %s (from the rows' pace), %+.1f%% off",
			f.unitWord(1), thousands(math.Round(f.Last+f.In)), f.unitWord(1), thousands(math.Round(at)), off)
	}
	return s
}
