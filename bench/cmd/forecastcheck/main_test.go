package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const (
	mib = 1 << 20
	t0  = int64(1_800_000_000_000_000_000)
)

// leakRun records a process leaking leak bytes a step under a 16 GiB cap
// (its rows say it), a "Step N" row a second, until its peak passes the
// cap: the OOM comes then, at oomStep.
func leakRun(t *testing.T, leak uint64, oomAt float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.gputop")
	w, err := recording.Create(path, wire.Recording{Type: wire.TypeRecording, V: wire.Version, Start: t0, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	in := ingest.New(store.New(store.DefaultOptions()))
	in.SetTap(w)
	in.Apply(77, wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: 77, T: t0,
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-fc", Name: "GPU", Total: 80 << 30}}})
	for i := 1; ; i++ {
		b := uint64(2<<30) + uint64(i-1)*leak
		at := t0 + int64(i)*int64(time.Second)
		peak := b + 1<<30
		if leak > 0 && float64(i) >= oomAt {
			in.Apply(77, wire.OOM{Type: wire.TypeOOM, T: at - int64(time.Second)/2, Dev: 0, Requested: 1 << 30, Limit: 16 << 30, Allocated: b, Reserved: b, Peak: b})
			break
		}
		if leak == 0 && i > 40 {
			break
		}
		in.Apply(77, wire.Sample{Type: wire.TypeSample, T: at - int64(time.Second)/2, Dev: 0, Allocated: peak, Reserved: peak, Peak: peak})
		in.Apply(77, wire.Mark{Type: wire.TypeMark, T: at, Label: fmt.Sprintf("Step %d", i),
			Devs: []wire.DevStats{{Dev: 0, Allocated: b + leak, Reserved: peak, Peak: peak, Limit: 16 << 30}}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, path string) []result {
	t.Helper()
	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(path, st); err != nil {
		t.Fatal(err)
	}
	var out []result
	for _, a := range st.Agents() {
		out = append(out, check(st, &a, 0, 0.15))
	}
	return out
}

// A leak whose OOM comes where its rows say passes; one that comes far
// earlier fails; a flat run passes with no OOM forecast.
func TestCheck(t *testing.T) {
	// 16 GiB − 3 GiB over 100 MiB a step: the peak passes the cap at step 134
	if r := load(t, leakRun(t, 100*mib, 134)); len(r) != 1 || !r[0].Pass || r[0].WorstOff > 0.02 {
		t.Errorf("%+v", r)
	}
	if r := load(t, leakRun(t, 100*mib, 60)); len(r) != 1 || r[0].Pass {
		t.Errorf("an OOM far before the forecast passed: %+v", r[0].Why)
	}
	if r := load(t, leakRun(t, 0, 0)); len(r) != 1 || !r[0].Pass || r[0].OOMStep != 0 {
		t.Errorf("%+v", r)
	}
}
