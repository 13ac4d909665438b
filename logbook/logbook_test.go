package logbook

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Lines keeps the last Keep lines; Last counts every one.
func TestKeepsTheLastLines(t *testing.T) {
	b := New()
	for i := 0; i < 250; i++ {
		b.Add(fmt.Sprintf("line %d", i))
	}
	l := b.Lines()
	if len(l) != Keep || l[0] != "line 50" || l[Keep-1] != "line 249" {
		t.Fatalf("kept %d lines, first %q last %q", len(l), l[0], l[len(l)-1])
	}
	if n, last := b.Last(); n != 250 || last != "line 249" {
		t.Fatalf("Last = %d %q", n, last)
	}
}

// OnAdd sees every line, however many; Lines keeps the last Keep.
func TestOnAddSeesEveryLine(t *testing.T) {
	b := New()
	var seen []string
	b.OnAdd(func(l string) { seen = append(seen, l) })
	for i := 0; i < 500; i++ {
		b.Add(fmt.Sprint("event ", i))
	}
	if len(seen) != 500 || seen[0] != "event 0" || seen[499] != "event 499" || len(b.Lines()) != Keep {
		t.Fatalf("OnAdd saw %d lines, Lines has %d", len(seen), len(b.Lines()))
	}
}

// A peer's text cannot drive the terminal through a log line.
func TestLinesArePrintable(t *testing.T) {
	b := New()
	b.Add("pid 9 (\x1b]0;x\x07): attached\nsecond")
	_, l := b.Last()
	if strings.ContainsAny(l, "\x1b\x07\n") {
		t.Fatalf("line kept control characters: %q", l)
	}
}

// A nil book drops lines and reads as empty.
func TestNilBook(t *testing.T) {
	var b *Book
	b.Add("x")
	if n, l := b.Last(); n != 0 || l != "" || b.Lines() != nil {
		t.Fatal("nil book is not empty")
	}
}

func TestConcurrentAdds(t *testing.T) {
	b := New()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				b.Add("x")
				b.Last()
			}
		}()
	}
	wg.Wait()
	if n, _ := b.Last(); n != 4000 {
		t.Fatalf("count %d", n)
	}
}
