package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// ledgerRecording writes a real recording of a training process on a
// 16 GiB GPU: 6 steps of a second, a row with a ledger after each (1 GiB
// of parameters, grads from step 2, 2 GiB of optimizer state from step 3,
// activations growing 256 MiB a step, torch's cache 512 MiB over what is
// allocated), NVML's used memory and process list (so outside torch is
// known: 300 MiB of CUDA context).
func ledgerRecording(t *testing.T, path string) {
	t.Helper()
	w, err := recording.Create(path, wire.Recording{Type: wire.TypeRecording, V: wire.Version, Start: base, Tool: "test", RateHz: 100})
	if err != nil {
		t.Fatal(err)
	}
	in := ingest.New(store.New(store.DefaultOptions()))
	in.SetTap(w)
	const pid = 4242
	in.Device(store.Device{Index: 0, UUID: "GPU-ledger", Name: "Test GPU", Total: 16 << 30, Source: "nvml"})
	in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"}, Torch: "2.11.0", T: base,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-ledger", Name: "Test GPU", Total: 16 << 30}}})
	const ctx = 300 * mib
	for step := 1; step <= 6; step++ {
		l := wire.Ledger{Params: gib, Activations: uint64(step) * 256 * mib, OtherTensors: 64 * mib, Workspace: 32 * mib, TookMS: 12}
		if step >= 2 {
			l.Grads = gib
		}
		if step >= 3 {
			l.Optimizer = 2 * gib
		}
		l.Allocated = l.Params + l.Grads + l.Optimizer + l.Activations + l.OtherTensors + l.Workspace + 8*mib
		reserved := l.Allocated + 512*mib
		l.Reserved = reserved
		start := base + int64(step-1)*int64(time.Second)
		for i := range 10 {
			t := start + int64(i)*int64(100*time.Millisecond)
			in.Apply(pid, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: l.Allocated, Reserved: reserved, Peak: l.Allocated})
			in.NVML(0, t, reserved+ctx, 0)
			in.Apply(0, wire.Procs{Type: wire.TypeProcs, T: t, Dev: 0, Procs: []wire.Proc{{PID: pid, Name: "python", Used: reserved + ctx}}})
		}
		at := start + int64(time.Second) - 1
		l.T = at
		ds := wire.DevStats{Dev: 0, Allocated: l.Allocated, Reserved: reserved, Peak: l.Allocated, Ledger: &l}
		if step == 5 { // with allocation history on: what was live at the step's peak, by line
			ds.PeakLines = &wire.PeakLines{T: at - int64(400*time.Millisecond), Allocated: l.Allocated,
				Lines: []wire.PeakLine{
					{File: "train.py", Line: 42, Func: "forward", Bytes: 1280 * mib, Blocks: 20},
					{File: "train.py", Line: 17, Func: "main", Bytes: 1024 * mib, Blocks: 4},
				}, MoreLines: 3, More: 96 * mib, Unknown: l.Allocated - 2400*mib}
		}
		in.Apply(pid, wire.Mark{Type: wire.TypeMark, T: at, Label: fmt.Sprintf("step %d", step), Devs: []wire.DevStats{ds}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// golden compares a screen with e2e/testdata/NAME.golden (-update
// rewrites it), its lines' trailing blanks left out.
func golden(t *testing.T, name, scr string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(scr, "\n"), "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", name+".golden")
	if *updateGoldens {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -run %s -update)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("the screen differs from %s (go test ./e2e -run %s -update if intended)\n got:\n%s\nwant:\n%s", path, t.Name(), got, want)
	}
}

// The chart's stacked view of the ledger in a real terminal, replaying a
// recording whose rows have ledgers: b swaps the chart's series for a bar
// of each row's parts, whose legend gives the figures of the newest row
// at the cursor, then (80x24, where the summary shows) of the selected
// row, step 3 after three ↑ from the newest; the help names the key, and
// b again brings the series back. At 80x24 and 40x10.
func TestLedgerStackedView(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "ledger.gputop")
	ledgerRecording(t, rec)
	for _, c := range []struct{ w, h int }{{80, 24}, {40, 10}} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			// a relative name: the title, in the goldens, is the same each run
			tm := startTermCmd(t, c.w, c.h, "env", "-C", filepath.Dir(rec), binary, "--replay", filepath.Base(rec))
			tm.waitFor("GPU 0") // the name gives way at 40 columns
			tm.keys("End", "b")
			scr := tm.waitFor(`ledger "step 6"`)
			if !strings.Contains(scr, "█") || !strings.Contains(scr, "█P 1.00 GiB") {
				t.Errorf("no bars on the chart, or no params in the legend:\n%s", scr)
			}
			if c.w >= 80 {
				tm.keys("Tab", "G", "Up", "Up", "Up")
				scr = tm.waitFor(`ledger "step 3"`)
				// step 3: grads and optimizer state there, 768 MiB of
				// activations, 300 MiB outside torch
				for _, want := range []string{"█G 1.00 GiB", "█O 2.00 GiB", "█A 768.0 MiB", "█C 512.0 MiB", "█X 300.0 MiB"} {
					if !strings.Contains(scr, want) {
						t.Errorf("step 3's legend lacks %q:\n%s", want, scr)
					}
				}
			}
			golden(t, fmt.Sprintf("ledgerview_%dx%d", c.w, c.h), scr)
			tm.keys("b")
			tm.waitUntil("the series back", func(s string) bool { return !strings.Contains(s, `ledger "step`) && strings.Contains(s, "NVML") })
			// the help names the key, on one of its pages
			found := false
			for range 10 {
				tm.keys("?")
				time.Sleep(300 * time.Millisecond)
				if strings.Contains(strings.Join(strings.Fields(tm.screen()), " "), " b chart ledger") {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("no page of the help names b:\n%s", tm.screen())
			}
		})
	}
}

// A row sent with the blocks live at its interval's peak by allocating
// line (allocation history on) shows them with the peak's composition
// when selected, in a real terminal replaying the recording.
func TestPeakLinesShown(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "ledger.gputop")
	ledgerRecording(t, rec)
	tm := startTerm(t, 160, 50, "--replay", rec)
	tm.waitFor("Test GPU")
	tm.keys("End", "Tab", "G", "Up")
	scr := tm.waitForWords("selected row 5 of 6: step 5")
	want := "blocks live at the peak (5.35 GiB, 400ms before the row), by allocating line: 1.25 GiB in 20 blocks train.py:42 forward; " +
		"1.00 GiB in 4 blocks train.py:17 main; 3 lines more: 96.0 MiB; 3.01 GiB allocated before the history's first entry (no line known)"
	if !strings.Contains(strings.Join(strings.Fields(scr), " "), want) {
		t.Errorf("step 5's details lack\n  %s\n%s", want, scr)
	}
	tm.keys("Up")
	scr = tm.waitForWords("selected row 4 of 6: step 4")
	if strings.Contains(scr, "blocks live at the peak") {
		t.Errorf("step 4, sent without lines, shows some:\n%s", scr)
	}
}

// `gputop export` (and `gputop run`'s summary, the same lines) names the
// blocks live at the highest peak by allocating line; when the highest
// peak has none (history on for part of the run), those of the highest
// peak that has them, with its row named.
func TestPeakLinesExported(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "ledger.gputop")
	ledgerRecording(t, rec)
	out, code := run(t, "export", rec, "--csv", filepath.Join(dir, "ledger.csv"))
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, out)
	}
	want := `  before "step 5", the highest peak with its blocks known by line: blocks live at the peak (5.35 GiB, 400ms before the row), by allocating line: ` +
		"1.25 GiB in 20 blocks train.py:42 forward; 1.00 GiB in 4 blocks train.py:17 main; 3 lines more: 96.0 MiB; 3.01 GiB allocated before the history's first entry (no line known)"
	if !strings.Contains(out, want+"\n") {
		t.Errorf("export's text lacks\n%s\n%s", want, out)
	}
	if i, j := strings.Index(out, "highest peak, before \"step 6\""), strings.Index(out, want); i < 0 || j < i {
		t.Errorf("the lines do not follow step 6's highest peak:\n%s", out)
	}
}
