package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// gputop_torch_ledger_bytes{part} is the ledger of each process's newest
// row that has one (a later row without one, or with a skipped walk,
// leaves it), its parts adding up to NVML's figure for the process; with
// no NVML figure at the walk there is no outside_torch series (never 0).
func TestCollectorLedgerSeries(t *testing.T) {
	st := newStore()
	st.AgentHello(rankHello(4242, "3"))
	st.AgentSample(4242, wire.Sample{T: t0 + ms, Dev: 0, Allocated: 1000, Reserved: 4096})
	c := NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, t0+time.Second.Nanoseconds()) }})
	proc := `gpu="0",UUID="` + uuid + `",modelName="NVIDIA H200",Hostname="node1",pid="4242",rank="3",local_rank="3",job_id="tr-5f3a"`
	series := func(parts map[string]int) []string {
		var out []string
		for _, p := range []string{"activations", "cached_free", "grads", "optimizer", "other_tensors", "outside_torch", "params", "unattributed", "workspace"} {
			if v, ok := parts[p]; ok {
				out = append(out, canon(fmt.Sprintf(`gputop_torch_ledger_bytes{%s,part=%q} %d`, proc, p, v)))
			}
		}
		return out
	}
	check := func(what string, want []string) {
		t.Helper()
		got := matching(scrape(t, c), "gputop_torch_ledger_bytes")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
	}
	check("before any ledger", nil)

	mark := func(t int64, label string, l *wire.Ledger) {
		st.AgentMark(4242, wire.Mark{T: t, Label: label, Devs: []wire.DevStats{{Dev: 0, Allocated: 1000, Reserved: 4096, Peak: 1000, Ledger: l}}})
	}
	ledger := wire.Ledger{T: t0 + 3*ms, Allocated: 1000, Reserved: 4096, Params: 400, Grads: 100, Optimizer: 300, Activations: 50, OtherTensors: 60, Workspace: 32}
	st.SetProcs(0, t0+2*ms, []wire.Proc{{PID: 4242, Used: 4096 + 500}})
	mark(t0+3*ms, "step 1", &ledger)
	want := series(map[string]int{"params": 400, "grads": 100, "optimizer": 300, "activations": 50, "other_tensors": 60, "workspace": 32,
		"unattributed": 58, "cached_free": 3096, "outside_torch": 500})
	check("a mark with a ledger", want)
	sum := 0
	for _, v := range []int{400, 100, 300, 50, 60, 32, 58, 3096, 500} {
		sum += v
	}
	if sum != 4096+500 {
		t.Fatalf("the parts add up to %d", sum)
	}
	// later rows without one, or with a walk skipped, leave it as it was
	mark(t0+4*ms, "step 2", nil)
	mark(t0+5*ms, "step 3", &wire.Ledger{T: t0 + 5*ms, Skipped: "over its bound"})
	check("rows after it without a ledger", want)
	// a newer ledger whose walk NVML's lists no longer cover: no outside_torch
	l2 := ledger
	l2.T, l2.Params = t0+10*time.Second.Nanoseconds(), 458
	mark(l2.T, "step 4", &l2)
	check("no NVML figure at the walk", series(map[string]int{"params": 458, "grads": 100, "optimizer": 300, "activations": 50, "other_tensors": 60, "workspace": 32,
		"unattributed": 0, "cached_free": 3096}))
}
