package wire

import (
	"strings"
	"testing"
)

func TestPlaceReadsTheRankFields(t *testing.T) {
	h := Hello{Rank: "3", LocalRank: "1", WorldSize: "8", Job: "run-7"}
	got := h.Place()
	if want := (Place{Rank: 3, LocalRank: 1, WorldSize: 8, Job: "run-7"}); got != want {
		t.Fatalf("Place = %+v, want %+v", got, want)
	}
	if s := got.String(); s != "rank 3/8" {
		t.Errorf("String = %q, want rank 3/8", s)
	}
	none := Hello{}.Place()
	if none.Known() || none.String() != "" || none.Rank != -1 || none.WorldSize != -1 {
		t.Errorf("no fields: %+v %q", none, none.String())
	}
	if s := (Hello{Rank: "0"}).Place().String(); s != "rank 0" {
		t.Errorf("rank 0 without a world size: %q", s)
	}
}

// A bad value is left out with a message naming it; the good ones stay.
func TestCheckPlaceDropsWhatCannotBeUsed(t *testing.T) {
	for _, c := range []struct {
		name        string
		in          Hello
		rank, world string
		local, job  string
		msg         string
	}{
		{"not a number", Hello{Rank: "three", WorldSize: "8"}, "", "8", "", "", `"rank" (RANK) is "three", not a whole number; left out`},
		{"negative", Hello{Rank: "-1", WorldSize: "8"}, "", "8", "", "", `"rank" (RANK) is -1, want 0..16777216; left out`},
		{"world 0", Hello{Rank: "0", WorldSize: "0"}, "0", "", "", "", `"world_size" (WORLD_SIZE) is 0, want 1..16777216; left out`},
		{"rank past world", Hello{Rank: "8", WorldSize: "8", LocalRank: "0"}, "", "", "0", "", `"rank" 8 is not below "world_size" 8; both left out`},
		{"local past world", Hello{Rank: "1", WorldSize: "2", LocalRank: "5"}, "1", "2", "", "", `"local_rank" 5 is not below "world_size" 2; left out`},
		{"job too long", Hello{Rank: "1", Job: strings.Repeat("j", 200)}, "1", "", "", "", `"job" is 200 bytes, more than 128; left out`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, problems := CheckPlace(c.in)
			if got.Rank != c.rank || got.WorldSize != c.world || got.LocalRank != c.local || got.Job != c.job {
				t.Errorf("kept rank %q world %q local %q job %q", got.Rank, got.WorldSize, got.LocalRank, got.Job)
			}
			if len(problems) != 1 || problems[0] != c.msg {
				t.Errorf("problems = %q, want [%q]", problems, c.msg)
			}
			h := c.in
			h.Type, h.V, h.PID, h.T = TypeHello, Version, 1, 1
			if err := Check(h); err != nil {
				t.Errorf("Check refused the hello over its rank: %v", err)
			}
		})
	}
	if _, p := CheckPlace(Hello{Rank: "7", LocalRank: "3", WorldSize: "8", Job: "x"}); len(p) != 0 {
		t.Errorf("good fields: %q", p)
	}
}
