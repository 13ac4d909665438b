package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A label a spreadsheet would run as a formula (=, +, -, @) is written to
// the CSV as text: with a leading apostrophe, which spreadsheets hide. The
// numbers beside it, signed deltas included, are written as they are.
func TestExportedLabelsAreNoFormulas(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	labels := []string{`=HYPERLINK("http://x","y")`, "+1 epoch", "-cmd|' /C calc'!A0", "@SUM(A1)", "plain"}
	editedRecording(t, rec, func(l string) []string {
		out := []string{l}
		if strings.Contains(l, `"type":"snapshot"`) {
			for _, lab := range labels {
				b, _ := json.Marshal(lab)
				out = append(out, strings.Replace(l, `"label":"Recorded start"`, `"label":`+string(b), 1))
			}
		}
		return out
	})
	path := filepath.Join(dir, "s.csv")
	if msg, code := run(t, "export", rec, "--csv", path); code != 0 {
		t.Fatalf("export: exit %d: %s", code, msg)
	}
	recs := readCSV(t, path)
	got := map[string]bool{}
	deltas := 0
	for _, r := range recs[1:] {
		got[r[0]] = true
		if d := r[9]; d != "" { // delta_nvml_used_mb: a signed number, left as it is
			deltas++
			if d != "+0.00" {
				t.Errorf("row %q: delta_nvml_used_mb %q, want +0.00", r[0], d)
			}
		}
	}
	if deltas != len(labels) {
		t.Errorf("%d rows with an NVML delta, want %d", deltas, len(labels))
	}
	for _, lab := range labels {
		want := lab
		if lab != "plain" {
			want = "'" + lab
		}
		if !got[want] {
			t.Errorf("label %q: want the cell %q, CSV has %v", lab, want, got)
		}
	}
}
