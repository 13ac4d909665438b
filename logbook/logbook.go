// Package logbook keeps the lines gputop's parts write for the user (a
// source that stopped, an agent refused, a sampling fallback): the status
// line shows the newest, `record` prints every one. It is its own small
// thing so that sources, the store and the UI share it without any of them
// owning it.
package logbook

import (
	"sync"

	"github.com/gputop/gputop/printable"
)

// Keep is how many lines Lines returns; OnAdd sees every line.
const Keep = 200

// Book is a bounded log, safe for concurrent use. A nil *Book drops what
// is added and reads as empty, so a part given none needs no checks.
type Book struct {
	mu    sync.Mutex
	lines []string
	count uint64
	on    func(string)
}

// New returns an empty book.
func New() *Book { return &Book{} }

// Add appends a line. Lines are often built from what a peer sent (argv,
// torch versions, reasons), so each is made printable here, once for every
// reader.
func (b *Book) Add(line string) {
	if b == nil {
		return
	}
	line = printable.Clean(line)
	b.mu.Lock()
	b.lines = append(b.lines, line)
	if len(b.lines) > Keep {
		b.lines = append(b.lines[:0], b.lines[len(b.lines)-Keep:]...)
	}
	b.count++
	on := b.on
	b.mu.Unlock()
	if on != nil {
		on(line)
	}
}

// OnAdd makes f see every line Add appends, however many, in the adder's
// goroutine and without the book's lock: f must not block. Call it before
// anything logs.
func (b *Book) OnAdd(f func(string)) { b.mu.Lock(); b.on = f; b.mu.Unlock() }

// Lines returns the last Keep lines, oldest first.
func (b *Book) Lines() []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

// Last returns how many lines were ever added and the newest one; a
// screen compares the count to know a line arrived without copying any.
func (b *Book) Last() (count uint64, line string) {
	if b == nil {
		return 0, ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) > 0 {
		line = b.lines[len(b.lines)-1]
	}
	return b.count, line
}
