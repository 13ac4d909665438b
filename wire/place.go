package wire

import (
	"fmt"
	"strconv"
)

// Place is a process's place in a distributed job, read from its hello.
// A rank or size that the hello did not give (or gave unusable, see
// CheckPlace) is -1.
type Place struct {
	Rank, LocalRank, WorldSize int
	Job                        string
}

// MaxWorldSize bounds the ranks and world sizes gputop takes: no job has
// more processes, and a bound keeps a hostile number out of labels.
const MaxWorldSize = 1 << 24

// MaxJobBytes bounds a job id: it becomes a CSV cell and a Prometheus label.
const MaxJobBytes = 128

// Place returns the hello's place in a job. Fields CheckPlace would drop
// read as not given.
func (h Hello) Place() Place {
	c, _ := CheckPlace(h)
	return Place{Rank: placeInt(c.Rank), LocalRank: placeInt(c.LocalRank), WorldSize: placeInt(c.WorldSize), Job: c.Job}
}

// Known reports whether the place says anything.
func (p Place) Known() bool {
	return p.Rank >= 0 || p.LocalRank >= 0 || p.WorldSize >= 0 || p.Job != ""
}

// String is how a screen shows the rank: "rank 3/8", "rank 3" without a
// world size, "" without a rank.
func (p Place) String() string {
	switch {
	case p.Rank < 0:
		return ""
	case p.WorldSize < 0:
		return fmt.Sprintf("rank %d", p.Rank)
	}
	return fmt.Sprintf("rank %d/%d", p.Rank, p.WorldSize)
}

func placeInt(s string) int {
	if s == "" {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
