package agentlink

import (
	"errors"
	"sync"
)

// errOverBudget: the reader was closed to keep unfinished lines within the
// server's lineBudget.
var errOverBudget = errors.New("unfinished lines of all connections over the budget")

// defaultLineBudget bounds the memory that lines longer than a reader's
// first lineBufSize hold, across all connections: sixteen lines at the
// 1 MiB limit. A connection's first lineBufSize is not counted.
const defaultLineBudget = 16 << 20

// lineBudget is shared by a server's line readers. A reader asks for room
// before it grows its buffer past lineBufSize; when the room is not there,
// the reader holding the most is evicted (closed with a reason) until it
// is, so a hundred peers each sending most of a 1 MiB line without a
// newline cost at most the budget, and the one hogging it goes first.
type lineBudget struct {
	limit int

	mu   sync.Mutex
	used int
	peak int // the most used at any time, for tests
	held map[*lineReader]int
}

func newLineBudget(limit int) *lineBudget {
	return &lineBudget{limit: limit, held: map[*lineReader]int{}}
}

// grow asks for n more bytes for r. It evicts the readers holding the most
// (r included) until r's request fits, and reports false if r itself was
// evicted. Evicted readers' onEvict runs after the lock is released.
func (b *lineBudget) grow(r *lineReader, n int) bool {
	type victim struct {
		r    *lineReader
		held int
	}
	var out []victim
	b.mu.Lock()
	ok := !r.evicted
	for ok && b.used+n > b.limit {
		var top *lineReader
		for x, h := range b.held {
			if top == nil || h > b.held[top] {
				top = x
			}
		}
		// r counts with what it is about to hold
		if top == nil || b.held[r]+n >= b.held[top] {
			top = r
		}
		h := b.held[top]
		if top == r {
			h += n
			ok = false
		}
		out = append(out, victim{top, h})
		b.used -= b.held[top]
		delete(b.held, top)
		top.evicted = true
	}
	if ok {
		b.held[r] += n
		b.used += n
		b.peak = max(b.peak, b.used)
	}
	b.mu.Unlock()
	for _, v := range out {
		if v.r.onEvict != nil {
			v.r.onEvict(v.held, b.limit)
		}
	}
	return ok
}

// release returns everything r holds.
func (b *lineBudget) release(r *lineReader) {
	b.mu.Lock()
	b.used -= b.held[r]
	delete(b.held, r)
	b.mu.Unlock()
}

// usage returns the bytes held now and the most ever held.
func (b *lineBudget) usage() (used, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
