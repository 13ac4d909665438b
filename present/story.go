package present

import (
	"time"

	"github.com/gputop/gputop/store"
)

// storyAfter is how long after the last end row a recording's story is
// told: the row has its verdict on screen, and what came just after (its
// holders walk, the process's exit) has had time to arrive.
const storyAfter = time.Second

// StoryMoment is the instant at which a recording shows all it has to
// tell: just after its last end row ("After cleanup", "Training end"),
// else just after its last row, else its end; never past the end. ok is
// false when the store holds nothing.
func StoryMoment(st *store.Store) (t int64, ok bool) {
	start, end := st.Start(), st.End()
	if start == 0 {
		return 0, false
	}
	snaps := st.Rows()
	t = end
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i].End {
			t = snaps[i].T + int64(storyAfter)
			break
		}
	}
	if t == end && len(snaps) > 0 && !snaps[len(snaps)-1].End {
		t = snaps[len(snaps)-1].T + int64(storyAfter)
	}
	return min(max(t, start), end), true
}
