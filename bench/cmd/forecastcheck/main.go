// Command forecastcheck replays a recording's forecasts: for each agent
// process, the forecast as gputop made it at every step row (what it had
// then), against the step its OOM came at, and whether the process that
// never ran out of memory was ever forecast one.
//
//	go build -o bin/forecastcheck ./bench/cmd/forecastcheck
//	bin/forecastcheck [-within 0.15] [-json OUT] FILE
//
// A leaking run passes when every forecast from the first one with data
// to the OOM puts the OOM within -within of the step it came at; a run
// without an OOM passes when no forecast predicted one. Exit 1 when one
// does not.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// moment is one forecast as it stood at a step row.
type moment struct {
	Step   float64 `json:"step"`
	Status string  `json:"status"`
	OOMAt  float64 `json:"oom_at,omitempty"` // the step it put the OOM at
	Low    float64 `json:"low,omitempty"`
	High   float64 `json:"high,omitempty"`
	Off    float64 `json:"off,omitempty"` // (OOMAt − the OOM's step) ÷ the OOM's step
	Text   string  `json:"text"`
}

// result is one process's.
type result struct {
	PID      int      `json:"pid"`
	Dev      int      `json:"dev"`
	OOMStep  float64  `json:"oom_step,omitempty"` // from the rows' pace: the step the OOM came at
	Moments  []moment `json:"moments"`
	WorstOff float64  `json:"worst_off"`
	Pass     bool     `json:"pass"`
	Why      string   `json:"why"`
}

func main() {
	within := flag.Float64("within", 0.15, "a forecast must put the OOM within this share of the step it came at")
	out := flag.String("json", "", "also write the results as JSON to `FILE`")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: forecastcheck [-within 0.15] [-json OUT] FILE")
		os.Exit(2)
	}
	opt := store.DefaultOptions()
	opt.KeepGone, opt.KeepEnded = 0, 0 // a recording is read whole
	st := store.New(opt)
	if _, err := recording.Load(flag.Arg(0), st); err != nil {
		fmt.Fprintln(os.Stderr, "forecastcheck:", err)
		os.Exit(1)
	}
	var results []result
	ok := true
	for _, a := range st.Agents() {
		for _, dev := range a.DevMap {
			r := check(st, &a, dev, *within)
			results = append(results, r)
			ok = ok && r.Pass
		}
	}
	for _, r := range results {
		fmt.Printf("pid %d GPU %d: %s\n", r.PID, r.Dev, map[bool]string{true: "PASS", false: "FAIL"}[r.Pass]+": "+r.Why)
		for _, m := range r.Moments {
			fmt.Printf("  step %6.0f  %s\n", m.Step, m.Text)
		}
	}
	if *out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "forecastcheck:", err)
			os.Exit(1)
		}
	}
	if !ok {
		os.Exit(1)
	}
}

// check replays a's forecasts on dev at each of its step rows.
func check(st *store.Store, a *store.Agent, dev int, within float64) result {
	pid := a.Hello.PID
	r := result{PID: pid, Dev: dev}
	rows := st.ProcessRows(pid, dev, math.MaxInt64, store.DefaultMaxRows, nil)
	var oom *wire.Row
	var steps []wire.Row
	for i := range rows {
		switch {
		case rows[i].Source == wire.SourceOOM && oom == nil:
			oom = &rows[i]
		case oom == nil && len(rows[i].Label) > 5 && rows[i].Label[:5] == "Step ":
			steps = append(steps, rows[i])
		}
	}
	var last forecast.Forecast
	for _, s := range steps {
		f := forecast.For(st, a, dev, s.T, false)
		m := moment{Step: f.Last, Status: f.Status.String(), Text: f.Head()}
		if f.Status == forecast.OOM {
			m.OOMAt, m.Low, m.High = f.Last+f.In, f.Last+f.InLo, f.Last+f.InHi
			m.Text += fmt.Sprintf(" → step %.0f (%.0f–%.0f); cause: %s", m.OOMAt, m.Low, m.High, f.CauseText())
		}
		r.Moments = append(r.Moments, m)
		last = f
	}
	if oom == nil {
		r.Pass = true
		for _, m := range r.Moments {
			if m.Status == "oom" {
				r.Pass = false
			}
		}
		r.Why = map[bool]string{true: "no OOM, and no forecast predicted one", false: "no OOM, yet a forecast predicted one"}[r.Pass]
		return r
	}
	if last.SecondsPer <= 0 || last.Status == forecast.NotEnough {
		r.Why = "an OOM, with too few step rows before it to place it"
		return r
	}
	r.OOMStep = last.Last + float64(oom.T-last.LastT)/1e9/last.SecondsPer
	r.Pass = true
	seen := false
	for i := range r.Moments {
		m := &r.Moments[i]
		if m.Status == "not enough data" {
			continue
		}
		seen = true
		if m.Status != "oom" {
			r.Pass = false
			continue
		}
		m.Off = (m.OOMAt - r.OOMStep) / r.OOMStep
		r.WorstOff = max(r.WorstOff, math.Abs(m.Off))
		if math.Abs(m.Off) > within {
			r.Pass = false
		}
	}
	r.Pass = r.Pass && seen
	r.Why = fmt.Sprintf("OOM near step %.0f; forecasts with data put it within %.1f%% at worst (bound %.0f%%)",
		r.OOMStep, 100*r.WorstOff, 100*within)
	return r
}
