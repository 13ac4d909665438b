package present

import (
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

// Rows keeps the summary rows (deltas and verdicts computed) and the
// selected GPU's share of them until the store's rows change, the GPU
// changes or, in replay, the cursor passes a row: a screen redrawn for new
// samples costs nothing per row.
type Rows struct {
	ver   uint64
	n     int // rows up to the cursor (replay)
	devs  int
	dev   int
	rows  []summary.Row
	dr    summary.DeviceRows
	valid bool
	// what the rows read of the store's series, kept for the next time
	reads *summary.SeriesReads
}

// Get returns the rows of device dev and how many rows there are in all.
func (c *Rows) Get(st *store.Store, replay bool, cursor int64, devs []store.Device, dev int) (summary.DeviceRows, int) {
	ver := st.Shape().Rows
	n := -1
	if replay {
		n = st.CountRows(cursor)
	}
	if !c.valid || c.ver != ver || c.n != n || c.devs != len(devs) {
		snaps := st.Rows()
		if n >= 0 {
			snaps = snaps[:min(n, len(snaps))]
		}
		reads := c.reads
		if reads == nil {
			reads = &summary.SeriesReads{}
		}
		*c = Rows{ver: ver, n: n, devs: len(devs), dev: -1, rows: reads.RowsOf(st, snaps, devs), valid: true, reads: reads}
	}
	if c.dev != dev {
		c.dev, c.dr = dev, summary.ForDevice(c.rows, dev)
	}
	return c.dr, len(c.rows)
}
