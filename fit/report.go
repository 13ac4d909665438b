package fit

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// A run's status.
const (
	StatusFit         = "fit"         // measured: the peak held, or the child ended by itself
	StatusOOM         = "oom"         // an allocation failed: the value does not fit
	StatusUnstable    = "unstable"    // the peak still rose at --max-seconds: not measured
	StatusFailed      = "failed"      // it could not be measured (not found, exited with an error, no agent)
	StatusSkipped     = "skipped"     // above a value that ran out of memory: not run
	StatusInterrupted = "interrupted" // gputop fit was stopped during it
)

// MaxOutputLines bounds the lines of a failed child's output kept in the
// report.
const MaxOutputLines = 20

// Run is one child: the value, how it went, and what was measured.
type Run struct {
	Value        int          `json:"value"`
	Status       string       `json:"status"`
	Peak         uint64       `json:"peak_bytes"`          // torch's allocated peak, highest of the child's processes
	ReservedPeak uint64       `json:"reserved_peak_bytes"` // torch's reserved peak
	Steps        int          `json:"steps"`
	Seconds      float64      `json:"seconds"`
	Why          string       `json:"why"`   // what decided the status
	Ended        string       `json:"ended"` // how the child ended
	Limit        uint64       `json:"limit_bytes,omitempty"`
	Ledger       *wire.Ledger `json:"ledger,omitempty"`
	OOM          *OOM         `json:"oom,omitempty"`
	Notes        []string     `json:"notes,omitempty"`
	Output       []string     `json:"output,omitempty"` // a failed child's last lines
	// Predicted is the model's peak at Value (a --verify run)
	Predicted float64 `json:"predicted_bytes,omitempty"`
}

// OOM is the allocation that failed, as torch's OOM observer saw it.
type OOM struct {
	Requested uint64 `json:"requested_bytes"`
	Allocated uint64 `json:"allocated_bytes"`
	Limit     uint64 `json:"limit_bytes"`
}

// Measured says whether the run's peak is a point of the model.
func (r Run) Measured() bool { return r.Status == StatusFit && r.Peak > 0 }

// Report is what gputop fit found, written as a table (Text) and as JSON.
type Report struct {
	Command   []string `json:"command"`
	Limit     uint64   `json:"limit_bytes"`
	LimitFrom string   `json:"limit_from"`
	Margin    float64  `json:"margin"`
	Step      int      `json:"step"`
	Rule      struct {
		Steps      int     `json:"stable_steps"`
		Seconds    float64 `json:"stable_seconds"`
		MaxSeconds float64 `json:"max_seconds"`
	} `json:"rule"`
	Runs         []Run       `json:"runs"`
	Model        *Model      `json:"model,omitempty"`
	Prediction   *Prediction `json:"prediction,omitempty"`
	NoPrediction string      `json:"no_prediction,omitempty"` // why there is none
	Verify       []Run       `json:"verify,omitempty"`
	Notes        []string    `json:"notes,omitempty"`
	Seconds      float64     `json:"seconds"` // the whole fit
}

// Analyse fits the model to the report's runs and predicts the largest
// value, filling Model, Prediction or NoPrediction.
func (r *Report) Analyse() {
	r.Model, r.Prediction, r.NoPrediction = nil, nil, ""
	var points []Point
	var ooms, measured []int
	for _, run := range r.Runs {
		switch {
		case run.Measured():
			points = append(points, Point{Value: run.Value, Peak: run.Peak, Ledger: run.Ledger})
			measured = append(measured, run.Value)
		case run.Status == StatusOOM:
			ooms = append(ooms, run.Value)
		}
	}
	m, err := Fit(points)
	if err != nil {
		r.NoPrediction = err.Error()
		return
	}
	r.Model = &m
	if r.Limit == 0 {
		r.NoPrediction = "no memory limit is known: no child said how much memory its GPU had free (give --memory)"
		return
	}
	p, err := Predict(m, r.Limit, r.Margin, r.Step, ooms, measured)
	if err != nil {
		r.NoPrediction = err.Error()
		return
	}
	r.Prediction = &p
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text is the report as lines for a terminal: the runs' table, the model,
// the prediction and the verification. Text from the child (its output)
// is made printable.
func (r *Report) Text() []string {
	var out []string
	out = append(out, "command: "+printable.Clean(strings.Join(r.Command, " ")))
	out = append(out, table(r.Runs, r.ledgerShown())...)
	for _, run := range r.Runs {
		for _, n := range run.Notes {
			out = append(out, fmt.Sprintf("value %d: %s", run.Value, printable.Clean(n)))
		}
		if len(run.Output) > 0 {
			out = append(out, fmt.Sprintf("value %d's last lines of output:", run.Value))
			for _, l := range run.Output {
				out = append(out, "  | "+printable.Clean(l))
			}
		}
	}
	if r.Limit > 0 {
		out = append(out, fmt.Sprintf("limit: %s (%s); with the %s margin, a value fits when its peak is at most %s",
			units.Bytes(r.Limit), r.LimitFrom, percent(r.Margin), units.Bytes(uint64(float64(r.Limit)*(1-r.Margin)))))
	}
	if m := r.Model; m != nil {
		out = append(out, fmt.Sprintf("model: peak = %s + %s × value, from %d values", signedBytes(m.Flat), signedBytes(m.PerValue), m.Points))
		if m.Measured {
			out = append(out, fmt.Sprintf("model error on the measured values: at most %s (%s)", percent(m.MaxError), units.Bytes(uint64(m.MaxErrorBytes))))
		} else {
			out = append(out, "model error: not measured (two values: the line passes through both; give three or more)")
		}
		for _, p := range m.Parts {
			out = append(out, fmt.Sprintf("  %-14s %s + %s × value", p.Part, signedBytes(p.Flat), signedBytes(p.PerValue)))
		}
	}
	if p := r.Prediction; p != nil {
		line := fmt.Sprintf("largest value predicted to fit: %d (peak %s of %s", p.Value, units.Bytes(uint64(p.Peak)), units.Bytes(p.Budget))
		switch {
		case !r.Model.Measured, p.ErrorValues == 0:
		case p.ErrorValues < 0.1:
			line += "; the model's error is under 0.1 of a value"
		default:
			line += fmt.Sprintf("; the model's error is ±%.1f of a value", p.ErrorValues)
		}
		out = append(out, line+")")
		lim := "limited by: " + p.LimitedBy
		if p.LimitedShare > 0 {
			lim += fmt.Sprintf(" (%s of the growth)", percent(p.LimitedShare))
		}
		out = append(out, lim+fmt.Sprintf(", %s per value", signedBytes(r.Model.PerValue)))
		for _, n := range p.Notes {
			out = append(out, "note: "+n)
		}
	} else if r.NoPrediction != "" {
		out = append(out, "no prediction: "+r.NoPrediction)
	}
	if len(r.Verify) > 0 {
		out = append(out, "verify:")
		out = append(out, table(r.Verify, r.ledgerShown())...)
		for _, v := range r.Verify {
			line := "  " + verdictOf(v, r)
			for _, n := range v.Notes {
				line += "; " + printable.Clean(n)
			}
			out = append(out, line)
		}
	}
	for _, n := range r.Notes {
		out = append(out, "note: "+printable.Clean(n))
	}
	return out
}

// verdictOf says whether a verify run came out as predicted.
func verdictOf(v Run, r *Report) string {
	p := r.Prediction
	switch {
	case p == nil:
		return fmt.Sprintf("%d: %s", v.Value, v.Status)
	case v.Value <= p.Value && v.Status == StatusFit:
		return fmt.Sprintf("%d fit, as predicted (measured %s, predicted %s: %s)", v.Value, units.Bytes(v.Peak), units.Bytes(uint64(v.Predicted)), errorOf(v))
	case v.Value <= p.Value && v.Status == StatusOOM:
		return fmt.Sprintf("%d ran out of memory: the prediction was wrong", v.Value)
	case v.Value > p.Value && v.Status == StatusOOM:
		return fmt.Sprintf("%d ran out of memory, as predicted", v.Value)
	case v.Value > p.Value && v.Status == StatusFit && v.Peak <= r.Limit:
		return fmt.Sprintf("%d fit too (measured %s, predicted %s: %s): within the %s margin", v.Value, units.Bytes(v.Peak), units.Bytes(uint64(v.Predicted)), errorOf(v), percent(r.Margin))
	}
	return fmt.Sprintf("%d: %s (%s)", v.Value, v.Status, v.Why)
}

func errorOf(v Run) string {
	if v.Peak == 0 {
		return "no error"
	}
	return fmt.Sprintf("error %s", percent(math.Abs(float64(v.Peak)-v.Predicted)/float64(v.Peak)))
}

// VerifiedWrong says whether a verify run contradicted the prediction: the
// predicted value did not fit.
func (r *Report) VerifiedWrong() bool {
	for _, v := range r.Verify {
		if r.Prediction != nil && v.Value <= r.Prediction.Value && v.Status != StatusFit {
			return true
		}
	}
	return false
}

func (r *Report) ledgerShown() bool {
	for _, run := range append(append([]Run(nil), r.Runs...), r.Verify...) {
		if run.Ledger != nil {
			return true
		}
	}
	return false
}

// table is the runs as aligned lines: value, status, peaks, the ledger's
// parts (when a run has one), steps, seconds and why.
func table(runs []Run, ledger bool) []string {
	head := []string{"value", "status", "peak", "reserved"}
	if ledger {
		head = append(head, "params", "grads", "optimizer", "activations", "other")
	}
	head = append(head, "steps", "time", "why")
	rows := [][]string{head}
	for _, r := range runs {
		peak := units.Bytes(r.Peak)
		if r.Status == StatusOOM && r.OOM != nil {
			peak = "> " + units.Bytes(r.OOM.Limit)
		} else if r.Peak == 0 {
			peak = "-"
		}
		res := "-"
		if r.ReservedPeak > 0 {
			res = units.Bytes(r.ReservedPeak)
		}
		row := []string{fmt.Sprint(r.Value), r.Status, peak, res}
		if ledger {
			if l := r.Ledger; l != nil {
				row = append(row, units.Bytes(l.Params), units.Bytes(l.Grads), units.Bytes(l.Optimizer), units.Bytes(l.Activations), units.Bytes(l.OtherTensors))
			} else {
				row = append(row, "-", "-", "-", "-", "-")
			}
		}
		why := r.Why
		if r.OOM != nil {
			why = fmt.Sprintf("asked %s with %s allocated", units.Bytes(r.OOM.Requested), units.Bytes(r.OOM.Allocated))
		}
		if r.Ended != "" && !strings.Contains(why, r.Ended) {
			why += "; " + r.Ended
		}
		secs := "-"
		if r.Seconds > 0 {
			secs = fmt.Sprintf("%.1f s", r.Seconds)
		}
		row = append(row, fmt.Sprint(r.Steps), secs, printable.Clean(why))
		rows = append(rows, row)
	}
	widths := make([]int, len(head))
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	out := make([]string, 0, len(rows))
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(c)
				break
			}
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 1 || i == len(row)-1 {
				b.WriteString(c + pad) // words left, figures right
			} else {
				b.WriteString(pad + c)
			}
			b.WriteString("  ")
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

func percent(f float64) string {
	return strconv.FormatFloat(f*100, 'g', 3, 64) + "%"
}
