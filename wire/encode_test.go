package wire

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func randList(r *rand.Rand) []int64 {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []int64{}
	}
	xs := make([]int64, 1+r.IntN(6))
	for i := range xs {
		switch r.IntN(4) {
		case 0:
			xs[i] = math.MinInt64
		case 1:
			xs[i] = math.MaxInt64
		default:
			xs[i] = r.Int64N(1<<40) - 1<<39
		}
	}
	return xs
}

// The fast encoders give exactly encoding/json's bytes, for every shape of
// list (nil, empty, extremes), so a recording's batch lines are the wire
// types' JSON.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		n := NVML{Type: TypeNVML, Dev: r.IntN(64) - 1, T0: r.Int64(), DT: randList(r), Used: randList(r), Reserved: randList(r)}
		want, _ := json.Marshal(&n)
		if got := n.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("NVML %d:\n got  %s\n want %s", i, got, want)
		}
		s := Samples{Type: TypeSamples, PID: r.IntN(1 << 22), Dev: r.IntN(8), T0: r.Int64(), DT: randList(r)}
		for _, l := range s.Lists() {
			*l = randList(r)
		}
		want, _ = json.Marshal(&s)
		if got := s.AppendJSON([]byte("x")); string(got[1:]) != string(want) || got[0] != 'x' {
			t.Fatalf("Samples %d:\n got  %s\n want %s", i, got, want)
		}
	}
}

func TestSampleListsAreTheJSONNames(t *testing.T) {
	var s Samples
	for _, l := range s.Lists() {
		*l = []int64{1}
	}
	var m map[string]any
	b, _ := json.Marshal(&s)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, name := range SampleLists {
		if _, ok := m[name]; !ok {
			t.Errorf("%q is not a JSON field of Samples: %s", name, b)
		}
	}
}

func BenchmarkSamplesAppendJSON(b *testing.B) {
	s := Samples{Type: TypeSamples, PID: 1234, Dev: 0, T0: 1, DT: make([]int64, 100)}
	ls := s.Lists()
	for _, l := range ls[:3] {
		*l = make([]int64, 100)
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendJSON(buf[:0])
	}
}
