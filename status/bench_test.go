package status

import (
	"fmt"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// A report of a store at its row bound (store.DefaultMaxRows rows of 8
// agents): what one `gputop status` costs the running gputop.
func BenchmarkOfAFullStore(b *testing.B) {
	st := newStore()
	for p := range 8 {
		st.AgentHello(hello(1000+p, 0))
	}
	for i := range store.DefaultMaxRows {
		st.AgentMark(1000+i%8, mark(t0+int64(i+1)*ms, fmt.Sprintf("Step %d", i), wire.DevStats{Dev: 0, Allocated: uint64(i)}))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if r := Of(st, Options{Source: wire.StatusFromGputop}); r.RowsLeftOut != store.DefaultMaxRows-wire.MaxStatusRows {
			b.Fatalf("%d rows left out", r.RowsLeftOut)
		}
	}
}
