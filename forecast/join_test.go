package forecast

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const t0 = int64(1_800_000_000_000_000_000)

// run is a training process on an agent: a hello on one GPU of total
// bytes, then steps of a second each, every step samples going from the
// baseline up by transient and back, and a "Step N" row after each of
// them; the baseline grows by leak a step.
type run struct {
	in        *ingest.Ingest
	pid       int
	base      uint64
	leak      uint64
	transient uint64
	limit     uint64 // the cap the marks say (0: none)
	ledgers   bool   // the marks carry a ledger: the leak in other tensors
	step      int
}

func newRun(in *ingest.Ingest, pid int, total, base, leak, transient uint64) *run {
	in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, Argv: []string{"train.py"}, T: t0,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-forecast", Name: "Test GPU", Total: total}}})
	return &run{in: in, pid: pid, base: base, leak: leak, transient: transient}
}

// at is the time of step n's row.
func at(n int) int64 { return t0 + int64(n)*int64(time.Second) }

// steps runs n more steps.
func (r *run) steps(n int) {
	for range n {
		r.step++
		b := r.base + uint64(r.step-1)*r.leak
		start := at(r.step - 1)
		for i, v := range []uint64{b, b + r.transient, b + r.transient/2, b + r.leak} {
			r.in.Apply(r.pid, wire.Sample{Type: wire.TypeSample, T: start + int64(i+1)*int64(100*time.Millisecond), Dev: 0,
				Allocated: v, Reserved: b + r.transient, Peak: b + r.transient})
		}
		al := b + r.leak
		ds := wire.DevStats{Dev: 0, Allocated: al, Reserved: b + r.transient, Peak: b + r.transient, Limit: r.limit}
		if r.ledgers {
			ds.Ledger = &wire.Ledger{T: at(r.step), Allocated: al, Reserved: ds.Reserved, Params: r.base / 2, Optimizer: r.base / 2,
				OtherTensors: uint64(r.step) * r.leak}
		}
		r.in.Apply(r.pid, wire.Mark{Type: wire.TypeMark, T: at(r.step), Label: fmt.Sprintf("Step %d", r.step), Devs: []wire.DevStats{ds}})
	}
}

func agentOf(t *testing.T, st *store.Store, pid int) *store.Agent {
	t.Helper()
	for _, a := range st.Agents() {
		if a.Hello.PID == pid {
			return &a
		}
	}
	t.Fatalf("no agent %d", pid)
	return nil
}

// A process leaking a fixed amount a step: its step rows forecast the OOM
// near the step where its peak passes the GPU's total, once there are
// enough of them.
func TestForecastFromStepRows(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	const total = 16 << 30
	r := newRun(in, 4242, total, 2<<30, 64*mib, 1<<30)
	r.steps(MinPoints - 1)
	st := in.Store()
	f := For(st, agentOf(t, st, 4242), 0, at(r.step), true)
	if f.Status != NotEnough || !strings.Contains(f.Text(), "5 of 6 step rows") {
		t.Fatalf("after %d steps: %s", r.step, f.Text())
	}
	r.steps(20)
	f = For(st, agentOf(t, st, 4242), 0, at(r.step), true)
	if f.Status != OOM || f.Unit != Steps {
		t.Fatalf("after %d steps: %s", r.step, f.Text())
	}
	// the peak of step n is 2 GiB + (n-1)·64 MiB + 1 GiB: over 16 GiB from step 209
	want := 209.0
	if got := f.Last + f.In; got < want-1 || got > want+1 || f.Last+f.InLo > want || f.Last+f.InHi < want {
		t.Errorf("OOM predicted near step %.1f (%.1f–%.1f), want %.0f: %s", got, f.Last+f.InLo, f.Last+f.InHi, want, f.Text())
	}
	if !strings.Contains(f.Text(), "11.50 GiB left of 16.00 GiB (the GPU's total)") || !strings.Contains(f.Text(), "near step 209") {
		t.Errorf("text: %s", f.Text())
	}
	all := All(st, at(r.step), true)
	if len(all) != 1 || all[0].PID != 4242 || all[0].Status != OOM {
		t.Errorf("All: %+v", all)
	}
}

// A flat run is stable; its OOM-free rows never forecast one.
func TestFlatRunIsStable(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	r := newRun(in, 4243, 16<<30, 2<<30, 0, 1<<30)
	r.steps(40)
	st := in.Store()
	f := For(st, agentOf(t, st, 4243), 0, at(r.step), true)
	if f.Status != Stable {
		t.Fatalf("%s", f.Text())
	}
}

// Without step rows the forecast is in time, from the allocated series;
// an OOM frame's cap (set_per_process_memory_fraction) is the limit.
func TestForecastInTimeUnderACap(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	const pid = 4244
	in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, T: t0,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-forecast", Name: "Test GPU", Total: 80 << 30}}})
	// an OOM early on says the cap: 8 GiB of 80
	in.Apply(pid, wire.OOM{Type: wire.TypeOOM, T: t0 + 1, Dev: 0, Requested: 1 << 30, Limit: 8 << 30, Allocated: 7 << 30, Reserved: 7 << 30, Peak: 7 << 30})
	// 1 MiB a second of growth for 5 minutes, sampled every 100 ms, with a
	// 256 MiB spike every second
	for i := range 3000 {
		v := uint64(1<<30) + uint64(i/10)*mib
		if i%10 == 5 {
			v += 256 * mib
		}
		in.Apply(pid, wire.Sample{Type: wire.TypeSample, T: t0 + int64(i)*int64(100*time.Millisecond), Dev: 0, Allocated: v, Reserved: v, Peak: v})
	}
	st := in.Store()
	now := t0 + 300*int64(time.Second)
	f := For(st, agentOf(t, st, pid), 0, now, true)
	if f.Status != OOM || f.Unit != Seconds {
		t.Fatalf("%s", f.Text())
	}
	// peak now ≈ 1 GiB + 299 MiB + 256 MiB; 1 MiB a second to 8 GiB
	want := float64(8<<30-(1<<30+299*mib+256*mib)) / mib
	if s, _ := f.SecondsToOOM(); s < want*0.95 || s > want*1.05 {
		t.Errorf("OOM in %.0f s, want about %.0f: %s", s, want, f.Text())
	}
	if !strings.Contains(f.Text(), "set_per_process_memory_fraction") || !strings.Contains(f.Text(), "+60.0 MiB a minute") {
		t.Errorf("text: %s", f.Text())
	}
}

// The cause names the holder the end rows' walks saw grow.
func TestCauseFromEndRows(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	r := newRun(in, 4245, 16<<30, 2<<30, 64*mib, 1<<30)
	end := func(n int, losses uint64) {
		yes := true
		in.Apply(r.pid, wire.Mark{Type: wire.TypeMark, T: at(r.step) + 1, Label: "check", End: &yes,
			Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Held: &wire.Held{T: at(r.step) + 1, Allocated: 1, Python: 1,
				Top: []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: 2 << 30}, {Kind: "variable", Name: "losses", Bytes: losses}}}}}})
	}
	r.steps(2)
	end(2, 128*mib)
	r.steps(20)
	end(22, 1408*mib)
	st := in.Store()
	f := For(st, agentOf(t, st, r.pid), 0, at(r.step)+2, true)
	if want := "unknown (no ledger at the rows); `losses` grew 1.25 GiB between the holders walks"; f.CauseText() != want {
		t.Errorf("cause %q\nwant  %q", f.CauseText(), want)
	}
}

// A run that ran out of memory: its findings give the forecast at its
// last step row and what the forecast said before the OOM against the step
// the OOM came at.
func TestFindingsOfARunThatRanOutOfMemory(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	in.Device(store.Device{Index: 0, UUID: "GPU-forecast", Name: "Test GPU", Total: 16 << 30, Source: "nvml"})
	r := newRun(in, 4246, 16<<30, 2<<30, 64*mib, 1<<30)
	r.steps(200)
	// step 209's peak passes 16 GiB: the OOM comes half-way through it
	in.Apply(r.pid, wire.OOM{Type: wire.TypeOOM, T: at(208) + int64(time.Second)/2, Dev: 0, Requested: 1 << 30,
		Allocated: 15 << 30, Reserved: 15 << 30, Peak: 15 << 30})
	got := strings.Join(Findings(in.Store()), "\n")
	for _, want := range []string{
		"GPU 0 (Test GPU), pid 4246: forecast at Step 200: OOM in about 9 steps at this rate: +64.0 MiB a step (baseline), 576.0 MiB left of 16.00 GiB (the GPU's total), near step 209",
		" UTC the forecast said: OOM in about 9 steps at this rate, near step 209; it came near step 209 (from the rows' pace), -0.2% off",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
}

// A cap the step rows say (set_per_process_memory_fraction, read by the
// agent with the counters) is the limit before any OOM.
func TestCapFromTheRows(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	r := newRun(in, 4247, 80<<30, 2<<30, 64*mib, 1<<30)
	r.limit = 16 << 30
	r.steps(40)
	st := in.Store()
	f := For(st, agentOf(t, st, r.pid), 0, at(r.step), true)
	// as TestForecastFromStepRows under 16 GiB: step 209
	if f.Status != OOM || f.Limit != 16<<30 || math.Round(f.Last+f.In) != 209 ||
		!strings.Contains(f.Text(), "of 16.00 GiB (the cap set_per_process_memory_fraction set)") {
		t.Errorf("%s", f.Text())
	}
	// a mark saying the whole GPU: no cap
	r.limit = 80 << 30
	r.steps(1)
	if f := For(st, agentOf(t, st, r.pid), 0, at(r.step), true); f.Limit != 80<<30 || !strings.Contains(f.Text(), "(the GPU's total)") {
		t.Errorf("%s", f.Text())
	}
}

// A stable training run sampled at 100 Hz for 10 minutes, without step
// rows: a model loaded over its first minute, then steps of 2 s that take
// 1 GiB of activations (of varying size) over a 4 GiB baseline and give it
// back. Its forecast in time, asked every 5 s along the way, never
// predicts an OOM.
func TestStableRunInTimeNeverForecastsAnOOM(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	const pid = 4248
	in.Apply(pid, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: pid, T: t0,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-forecast", Name: "Test GPU", Total: 16 << 30}}})
	st := in.Store()
	const hz = 100
	seed := uint64(1)
	rnd := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 33 }
	for i := range 600 * hz {
		s := float64(i) / hz
		v := uint64(4 << 30)
		switch {
		case s < 60:
			v = uint64(s / 60 * float64(4<<30))
		case int(s*hz)%(2*hz) < hz: // the first second of each step: activations
			v += 1<<30 - rnd()%(256*mib)
		}
		tt := t0 + int64(i)*int64(time.Second)/hz
		in.Apply(pid, wire.Sample{Type: wire.TypeSample, T: tt, Dev: 0, Allocated: v, Reserved: 6 << 30, Peak: 5 << 30})
		if i%(5*hz) == 0 && i > 0 {
			if f := For(st, agentOf(t, st, pid), 0, tt, true); f.Status == OOM {
				t.Fatalf("at %.0f s: %s", s, f.Text())
			}
		}
	}
	if f := For(st, agentOf(t, st, pid), 0, t0+600*int64(time.Second), true); f.Status != Stable || f.Unit != Seconds {
		t.Errorf("at the end: %s", f.Text())
	}
}

// Which labels count steps and epochs.
func TestRowCount(t *testing.T) {
	one := uint64(1)
	for label, want := range map[string]string{
		"Step 100": "steps 100", "step100": "steps 100", "  STEP #7": "steps 7", "iter 3": "steps 3", "iteration: 12": "steps 12",
		"Epoch 3": "epochs 3", "epoch 3 (end)": "epochs 3", "Step 5/100": "steps 5",
		"Steps 4": "", "stepper 1": "", "Step": "", "Step x": "", "Step 12a": "", "after step 3": "", "Epoch 1234567890123456": "",
	} {
		u, n, ok := rowCount(&wire.Row{Label: label, Allocated: &one})
		got := ""
		if ok {
			got = fmt.Sprintf("%s %.0f", map[Unit]string{Steps: "steps", Epochs: "epochs"}[u], n)
		}
		if got != want {
			t.Errorf("%q: %q, want %q", label, got, want)
		}
	}
	if _, _, ok := rowCount(&wire.Row{Label: "Step 1", Allocated: &one, Source: wire.SourceOOM}); ok {
		t.Error("an OOM row counts")
	}
}

// Step rows that carry ledgers name the part that grows, and the holder a
// walk names for it.
func TestCauseFromRowLedgers(t *testing.T) {
	in := ingest.New(store.New(store.DefaultOptions()))
	r := newRun(in, 4249, 16<<30, 2<<30, 64*mib, 1<<30)
	r.ledgers = true
	r.steps(20)
	in.Apply(r.pid, wire.Holders{Type: wire.TypeHolders, T: at(r.step), Dev: 0,
		Groups: []wire.HolderGroup{{Kind: "parameters", Name: "model", Bytes: 1 << 30}, {Kind: "container", Name: "losses", Bytes: 20 * 64 * mib}}})
	st := in.Store()
	f := For(st, agentOf(t, st, r.pid), 0, at(r.step), true)
	if want := "other tensors +64.0 MiB a step, held by `losses` (the largest such holder at the last holders walk)"; f.Status != OOM || f.CauseText() != want {
		t.Errorf("%s\nwant cause %q", f.Text(), want)
	}
}
