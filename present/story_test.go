package present

import (
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// The story's moment follows the recording's rows: a second after the
// last end row, else after the last row, else the end.
func TestStoryMoment(t *testing.T) {
	st := store.New(store.DefaultOptions())
	if _, ok := StoryMoment(st); ok {
		t.Fatal("an empty store has no story")
	}
	st = screenStore() // 0 .. 10 s
	if got, _ := StoryMoment(st); got != 10*sec {
		t.Fatalf("no rows: %d, want the end", got)
	}
	mark := func(ts int64, label string) {
		st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: ts, Label: label, Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Reserved: 1, Peak: 1}}})
	}
	mark(2*sec, "Epoch 1")
	if got, _ := StoryMoment(st); got != 3*sec {
		t.Fatalf("one row at 2 s: %d, want 3 s", got)
	}
	mark(4*sec, "After cleanup")
	mark(6*sec, "Epoch 2")
	if got, _ := StoryMoment(st); got != 5*sec {
		t.Fatalf("end row at 4 s: %d, want 5 s", got)
	}
	mark(int64(9.5*float64(sec)), "Training end")
	if got, _ := StoryMoment(st); got != 10*sec {
		t.Fatalf("end row at 9.5 s: %d, want the end (10 s)", got)
	}
}
