package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The title bar keeps the run's times at every width: the cursor and the
// run's total in a replay (paused or playing), the cursor live and paused;
// the window's name, the state's word and the source's name give way
// first, and "gputop" stays whole.
func TestTitleKeepsTheTimes(t *testing.T) {
	for _, w := range []int{40, 41, 45, 50, 60, 80, 120} {
		for _, c := range []struct {
			name string
			opt  Options
			keys []string
		}{
			{"replay paused", Options{Replay: true, Title: "demo: PyTorch MLP training run (H200)"}, nil},
			{"replay playing", Options{Replay: true, Title: "demo: PyTorch MLP training run (H200)"}, []string{"space"}},
			{"live paused", Options{Title: "node1,node2"}, []string{"space"}},
		} {
			t.Run(fmt.Sprintf("%s/%d", c.name, w), func(t *testing.T) {
				st := newFixture()
				m := newModel(t, st, c.opt, w, 24)
				m = send(t, m, press(c.keys...)...)
				title := strings.Split(screen(m), "\n")[0]
				cur := elapsed(time.Duration(m.tl.cursor(m.now()) - st.Start()))
				want := []string{" gputop ", cur}
				if c.opt.Replay {
					want = append(want, cur+" / "+elapsed(time.Duration(st.End()-st.Start())))
				}
				for _, s := range want {
					if !strings.Contains(title, s) {
						t.Errorf("the title at %d columns lacks %q: %q", w, s, title)
					}
				}
			})
		}
	}
}
