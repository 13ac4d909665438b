package present

import "github.com/gputop/gputop/store"

// Cache is torch's cache of one agent process on one GPU at an instant:
// the agent's newest layout reading then (its T says when it was read),
// and why the newest layout frame carried none when it did not.
type Cache struct {
	PID   int
	Label string // the pid as the process pane shows it
	Dev   int    // the GPU (a store device index)
	At    int64  // the instant asked about: the cursor (live: now)
	Live  bool   // At is now, not a cursor
	store.LayoutAt
}

// cacheOf is torch's cache of process p on dev at the query's instant (live:
// the newest reading), nil when p has no agent or its agent sent none.
func cacheOf(st *store.Store, q *Query, dev int, p Process) *Cache {
	if !p.Agent {
		return nil
	}
	c := Cache{PID: p.PID, Label: p.Label, Dev: dev, At: q.Now, Live: !q.atCursor()}
	if q.atCursor() {
		c.At, c.LayoutAt = q.Cursor, st.LayoutAt(p.PID, dev, q.Cursor)
	} else {
		c.LayoutAt = st.LatestLayout(p.PID, dev)
	}
	if !c.OK && c.Skipped == "" {
		return nil
	}
	return &c
}
