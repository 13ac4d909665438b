package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The recordings in testdata, made before rows had ids (edits-v3.gputop
// with twin rows renamed and deleted by label), export byte for byte as
// they did then (testdata/recordings/exported).
func TestOldRecordingsExportUnchanged(t *testing.T) {
	recs, _ := filepath.Glob("../testdata/recordings/*.gputop")
	recs = append(recs, "../demo/demo.gputop")
	if len(recs) < 7 {
		t.Fatalf("recordings: %v", recs)
	}
	for _, rec := range recs {
		name := strings.TrimSuffix(filepath.Base(rec), ".gputop")
		want, err := os.ReadFile(filepath.Join("../testdata/recordings/exported", name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "export", rec, "--csv", "-")
		cmd.Env = append(os.Environ(), "TZ=UTC")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("export %s: %v: %s", rec, err, stderr.String())
		}
		if !bytes.Equal(got, want) {
			t.Errorf("export of %s differs from what it was:\n%s\nwas:\n%s", rec, got, want)
		}
	}
}
