package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// ledgerFixture is a training process (pid 4242 on an H200) whose agent
// sends a mark with a ledger at the end of each 5 s step: 1 GiB of
// parameters, 1 GiB of gradients and 2 GiB of Adam's state once the
// first step is done, a 64 MiB batch and a 32 MiB workspace; activations
// rise to 5 GiB in the middle of each step (4.5 GiB in the third, which
// torch's peak counter does not see rise). NVML sees 12 GiB reserved and
// a 512 MiB CUDA context; the third step's mark reads a fragmented cache.
// A fourth mark's walk was skipped.
func ledgerFixture() *store.Store {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200, Source: "nvml", Rate: 998})
	const (
		reserved = 12 * gib
		ctx      = 512 * mib
		batch    = 64 * mib
		ws       = 32 * mib
	)
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: fixPID, Host: "h200",
		Argv: []string{"/usr/bin/python3", "train.py"}, Torch: "2.11.0",
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", Total: h200}}, T: at(time.Second)})
	var peak uint64
	persistent := func(ms int) (params, grads, opt uint64) {
		if ms < 10_000 {
			return gib, 0, 0
		}
		return gib, gib, 2 * gib
	}
	alloc := func(ms int) uint64 {
		p, g, o := persistent(ms)
		a := p + g + o + batch + ws
		step := ms % 5000
		top := uint64(5 * gib)
		if ms >= 15_000 && ms < 20_000 {
			top = 9 * gib / 2
		}
		if step > 0 && ms >= 5000 {
			// up to the middle of the step, down to none at its end
			d := min(step, 5000-step)
			a += top * uint64(d) / 2500
		}
		return a
	}
	mark := func(ms int, label string, l *wire.Ledger, lay *wire.Layout) {
		t, a := at(time.Duration(ms)*time.Millisecond), alloc(ms)
		if l != nil && l.Skipped == "" {
			l.T, l.Allocated, l.Reserved = t, a, reserved
		} else if l != nil {
			l.T = t
		}
		if lay != nil {
			lay.T = t
		}
		st.AgentMark(fixPID, wire.Mark{Type: wire.TypeMark, T: t, Label: label,
			Devs: []wire.DevStats{{Dev: 0, Allocated: a, Reserved: reserved, Peak: peak, Ledger: l, Layout: lay}}})
	}
	for ms := 1000; ms <= 40_000; ms += 10 {
		t := at(time.Duration(ms) * time.Millisecond)
		a := alloc(ms)
		peak = max(peak, a)
		st.AgentSample(fixPID, wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: a, Reserved: reserved, Peak: peak})
		st.AddNVML(0, t, 600*mib+ctx+reserved, 300*mib)
		if ms%100 == 0 {
			st.SetProcs(0, t, []wire.Proc{{PID: fixPID, Name: "python3", Used: ctx + reserved}})
		}
		ledger := func() *wire.Ledger {
			p, g, o := persistent(ms)
			return &wire.Ledger{Params: p, Grads: g, Optimizer: o, OtherTensors: batch, Workspace: ws, TookMS: 38}
		}
		switch ms {
		case 10_000:
			mark(ms, "step 1", ledger(), nil)
		case 15_000:
			mark(ms, "step 2", ledger(), nil)
		case 20_000:
			free := reserved - a
			mark(ms, "step 3", ledger(), &wire.Layout{Segments: 40, Blocks: 900, Reserved: reserved, Allocated: a,
				FreeInSegments: free, LargestFree: 2 * gib,
				Pools: []wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 40, Reserved: reserved, Allocated: a, LargestFree: 2 * gib}}})
		case 25_000:
			mark(ms, "step 4", &wire.Ledger{Skipped: "the walk would take 900 ms, over its bound of 200 ms"}, nil)
		}
	}
	return st
}

// selectRow opens the rows' focus and moves up from the newest row by up.
func selectRow(t *testing.T, m Model, up int) Model {
	t.Helper()
	m = send(t, m, press("tab")...)
	for range up {
		m = send(t, m, press("up")...)
	}
	return m
}

// The selected row's ledger under the table, at every golden size: the
// stacked bar, the figures adding up to NVML's figure for the process,
// the peak since the previous row broken down, and the advice.
func TestGoldenLedgerAtEverySize(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newModel(t, ledgerFixture(), Options{Title: fixTitle}, sz[0], sz[1])
			m = selectRow(t, m, 1) // step 3
			checkBox(t, m.View().Content, sz[0], sz[1])
			golden(t, fmt.Sprintf("ledger_%dx%d_table", sz[0], sz[1]), ansi.Strip(m.table.View()))
		})
	}
}

// What the ledger lines say of step 3 (at a width where nothing is cut):
// the nine parts and their sum, NVML's figure for the process, the peak
// as a bound (torch's counter did not rise), the advice naming its
// figures; step 2's peak is exact; a skipped walk says why.
func TestLedgerLinesSayWhatTheyAreBasedOn(t *testing.T) {
	m := newModel(t, ledgerFixture(), Options{Title: fixTitle}, 200, 80)
	m = selectRow(t, m, 1)
	out := ansi.Strip(strings.Join(m.table.ledgerLines(), "\n"))
	for _, want := range []string{
		"= 12.50 GiB NVML (process)",
		"P params 1.00 GiB", "G grads 1.00 GiB", "O optimizer state 2.00 GiB", "A activations 0 B",
		"T other tensors 64.0 MiB", "W workspaces 32.0 MiB", "U unattributed 0 B",
		"C cached free 7.91 GiB (largest free block 2.00 GiB", "X outside torch 512.0 MiB",
		"the agent's walk of live tensors at 0:00:19.0 (38 ms)", "outside torch: NVML's process list at 0:00:19.0 − reserved",
		`peak since "step 2": 8.59 GiB to 9.09 GiB, a bound`,
		`= persistent 4.09 GiB (ledger at "step 2") + activations and`, "4.50 GiB to 5.00 GiB",
		"advice: cached free 7.91 GiB is 66% of torch's reserved 12.00 GiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("step 3's ledger lacks %q:\n%s", want, out)
		}
	}
	m = send(t, m, press("up")...) // step 2
	out = ansi.Strip(strings.Join(m.table.ledgerLines(), "\n"))
	for _, want := range []string{`peak since "step 1": 9.09 GiB, exact (torch's peak counter rose)`,
		`advice: activations and temporaries 5.00 GiB are 55% of the peak 9.09 GiB`} {
		if !strings.Contains(out, want) {
			t.Errorf("step 2's ledger lacks %q:\n%s", want, out)
		}
	}
	m = send(t, m, press("down", "down")...) // step 4
	if out = ansi.Strip(strings.Join(m.table.ledgerLines(), "\n")); !strings.Contains(out, "no ledger: the walk would take 900 ms, over its bound of 200 ms") {
		t.Errorf("step 4: %s", out)
	}
}
