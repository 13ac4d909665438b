package main

import (
	"fmt"
	"io"
	"sync"
)

// maxPendingEvents bounds the log lines waiting for stderr: a terminal that
// is not being read (a stopped pager) must not grow the recorder without
// bound. Past it lines are counted, and the count printed, instead.
const maxPendingEvents = 100_000

// eventPrinter prints every line of the log, in order, however many: the
// log keeps only its last 200, and the sources that log must not
// wait for stderr, so lines wait here until flush prints them.
type eventPrinter struct {
	mu      sync.Mutex
	pending []string
	lost    int
}

// add is the log's OnAdd hook.
func (p *eventPrinter) add(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) >= maxPendingEvents {
		p.lost++
		return
	}
	p.pending = append(p.pending, line)
}

// flush prints the waiting lines, each after prefix.
func (p *eventPrinter) flush(w io.Writer, prefix string) {
	p.mu.Lock()
	lines, lost := p.pending, p.lost
	p.pending, p.lost = nil, 0
	p.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintln(w, prefix+l)
	}
	if lost > 0 {
		fmt.Fprintf(w, "%s%d more events not printed: stderr was not being read\n", prefix, lost)
	}
}
