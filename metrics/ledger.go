// The ledger of each process's newest row that has one: what its memory
// on a GPU was made of, part by part (gputop_torch_ledger_bytes{part}).

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

var descLedger = desc("gputop_torch_ledger_bytes", "What the process's memory on the GPU was made of at its newest row with a ledger, by part: "+
	"params, grads, optimizer, activations, other_tensors, workspace (the agent's walk of its live tensors), unattributed (allocated − those), "+
	"cached_free (torch's reserved − allocated), outside_torch (NVML's figure for the process − reserved; absent when NVML gave none). "+
	"With outside_torch, the parts add up to NVML's figure for the process.",
	ledgerLabels)

var ledgerLabels = append(append([]string(nil), procLabels...), "part")

// ledgers indexes the newest ledger rows of a scrape by process and device.
type ledgers map[[2]int]wire.Row

func newLedgers(st *store.Store) ledgers {
	out := ledgers{}
	for _, lr := range st.LatestLedgers() {
		out[[2]int{lr.PID, lr.Dev}] = lr.Row
	}
	return out
}

// emit sends the ledger series of pid on dev (labels: the process's),
// when it has a row with a ledger.
func (ls ledgers) emit(st *store.Store, pid, dev int, labels []string, gauge func(*prometheus.Desc, float64, labelSet)) {
	r, ok := ls[[2]int{pid, dev}]
	if !ok {
		return
	}
	l := *r.Ledger
	type part struct {
		name string
		v    uint64
	}
	parts := []part{
		{wire.PartParams, l.Params}, {wire.PartGrads, l.Grads}, {wire.PartOptimizer, l.Optimizer},
		{wire.PartActivations, l.Activations}, {wire.PartOtherTensors, l.OtherTensors}, {wire.PartWorkspace, l.Workspace},
		{wire.PartUnattributed, l.Unattributed()}, {wire.PartCachedFree, l.CachedFree()},
	}
	t := l.T
	if t == 0 {
		t = r.T
	}
	if used, _, ok := st.ProcUsedAt(dev, pid, t, store.ProcFigureAge); ok {
		if out, ok := l.OutsideTorch(used); ok {
			parts = append(parts, part{wire.PartOutsideTorch, out})
		}
	}
	for _, p := range parts {
		gauge(descLedger, float64(p.v), labelsOf(ledgerLabels, append(labels[:len(labels):len(labels)], p.name)))
	}
}
