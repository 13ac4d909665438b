package ui

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/summary"
)

// TestFullFlowInTheRealRuntime runs the model in the Bubble Tea runtime
// (frame ticks, commands in goroutines, View on the copies Update returns)
// over a replay: s (refused), r, a label, Enter, e, q; then checks the CSV
// on disk.
func TestFullFlowInTheRealRuntime(t *testing.T) {
	st := newFixture()
	csv := filepath.Join(t.TempDir(), "summary.csv")
	m := New(ingest.New(st), Options{
		Replay:   true,
		Title:    "run.gputop",
		CSVPath:  csv,
		FPS:      30,
		Now:      time.Now,
		WriteCSV: func(p string) error { return summary.WriteCSV(p, st.Rows(), st.Devices()) },
	})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	wait := func(what string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	}
	wait("replay")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnd}) // the whole recording
	wait("After cleanup")
	tm.Send(keyMsg("s")) // a replay takes no snapshot: it says so
	wait("a replay takes no snapshot")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyTab}) // the rows, at the newest
	tm.Send(keyMsg("r"))
	wait("rename row to")
	for range len("After cleanup") {
		tm.Send(tea.KeyPressMsg{Code: tea.KeyBackspace})
	}
	tm.Type("from the flow")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	wait("from the flow")
	tm.Send(keyMsg("e"))
	wait("wrote ")
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))

	data, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "from the flow,") {
		t.Fatalf("the last CSV row is %q, want the row renamed in the flow", last)
	}
	if got := len(lines) - 1; got != len(st.Rows()) {
		t.Errorf("CSV has %d rows, store %d", got, len(st.Rows()))
	}
}
