package fit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

func sampleReport() *Report {
	r := &Report{Command: []string{"python", "train.py", "--batch-size", "{}"}, Limit: 505 * mib, LimitFrom: "--memory", Margin: 0.05, Step: 1}
	for _, v := range []int{10, 20, 30} {
		r.Runs = append(r.Runs, Run{Value: v, Status: StatusFit, Peak: uint64(100+10*v) * mib, ReservedPeak: uint64(102+10*v) * mib, Steps: 6, Seconds: 4.2, Why: "the peak held for 5 steps", Ended: "stopped with SIGINT"})
	}
	r.Runs = append(r.Runs,
		Run{Value: 60, Status: StatusOOM, OOM: &OOM{Requested: 600 * mib, Allocated: 100 * mib, Limit: 505 * mib}, Why: "ran out of memory"},
		Run{Value: 70, Status: StatusSkipped, Why: "above 60, which ran out of memory"},
		Run{Value: 80, Status: StatusFailed, Why: "it exited with code 1", Output: []string{"Traceback \x1b[31m(most recent call last)", "ValueError: bad"}})
	return r
}

func TestReportFitsAndPredicts(t *testing.T) {
	r := sampleReport()
	r.Analyse()
	if r.Model == nil || r.Prediction == nil || r.Prediction.Value != 37 {
		t.Fatalf("model %+v prediction %+v (%s)", r.Model, r.Prediction, r.NoPrediction)
	}
	text := strings.Join(r.Text(), "\n")
	for _, want := range []string{
		"command: python train.py --batch-size {}",
		"limit: 505.0 MiB (--memory); with the 5% margin, a value fits when its peak is at most 479.8 MiB",
		"model: peak = 100.0 MiB + 10.0 MiB × value, from 3 values",
		"model error on the measured values: at most 0% (0 B)",
		"largest value predicted to fit: 37 (peak 470.0 MiB of 479.8 MiB)",
		"limited by: " + NoLedger + ", 10.0 MiB per value",
		"> 505.0 MiB", "asked 600.0 MiB with 100.0 MiB allocated",
		"skipped", "above 60, which ran out of memory",
		"value 80's last lines of output:", "  | Traceback \ufffd(most recent call last)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("the child's escape sequence reached the text:\n%q", text)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Prediction.Value != 37 || len(back.Runs) != 6 || back.Runs[3].OOM.Requested != 600*mib {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

func TestReportVerifyAndLedgerColumns(t *testing.T) {
	r := sampleReport()
	r.Runs[0].Ledger = &wire.Ledger{Params: 40 * mib, Optimizer: 80 * mib, Activations: 60 * mib}
	r.Analyse()
	p := r.Prediction
	r.Verify = []Run{
		{Value: p.Value, Status: StatusFit, Peak: 470 * mib, Predicted: r.Model.At(p.Value)},
		{Value: p.Value + 1, Status: StatusFit, Peak: 480 * mib, Predicted: r.Model.At(p.Value + 1)},
	}
	text := strings.Join(r.Text(), "\n")
	for _, want := range []string{"params", "activations", "40.0 MiB", "37 fit, as predicted", "38 fit too", "within the 5% margin"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	if r.VerifiedWrong() {
		t.Fatal("verified wrong")
	}
	r.Verify[0].Status = StatusOOM
	if !r.VerifiedWrong() || !strings.Contains(strings.Join(r.Text(), "\n"), "37 ran out of memory: the prediction was wrong") {
		t.Fatal("a predicted value that ran out of memory is not said")
	}
}

func TestReportSaysWhyThereIsNoPrediction(t *testing.T) {
	r := sampleReport()
	r.Runs = r.Runs[:1]
	r.Analyse()
	if r.Prediction != nil || !strings.Contains(strings.Join(r.Text(), "\n"), "no prediction: fewer than two values were measured") {
		t.Fatalf("%+v", r.Text())
	}
	r = sampleReport()
	r.Limit = 0
	r.Analyse()
	if r.Prediction != nil || !strings.Contains(r.NoPrediction, "no memory limit is known") {
		t.Fatalf("%q", r.NoPrediction)
	}
}
