package wire

import (
	"strings"
	"testing"
)

// What an agent may say of its frameworks is bounded where it comes in,
// and a refusal names what was wrong and where.
func TestFrameworkBounds(t *testing.T) {
	fig := Figure{Of: FigInUse, Native: "bytes_in_use", Value: 1}
	ok := Framework{Name: "jax", Figures: []Figure{fig}}
	many := func(n int) []Framework {
		out := make([]Framework, n)
		for i := range out {
			out[i] = ok
		}
		return out
	}
	figs := make([]Figure, MaxFigures+1)
	for i := range figs {
		figs[i] = fig
	}
	for _, c := range []struct {
		f    Frame
		want string
	}{
		{FrameworkReading{T: 1e18, Frameworks: many(MaxFrameworks + 1)}, `"frameworks" lists 5 frameworks, more than 4`},
		{FrameworkReading{T: 1e18, Frameworks: []Framework{{Figures: []Figure{fig}}}}, `"frameworks[0]" has no name`},
		{FrameworkReading{T: 1e18, Frameworks: []Framework{{Name: "jax", Figures: figs}}}, `"frameworks[0]" has 17 figures, more than 16`},
		{FrameworkReading{T: 1e18, Frameworks: []Framework{{Name: "jax", Figures: []Figure{{Value: 3}}}}}, `"frameworks[0]".figures[0]: a name is empty`},
		{Mark{T: 1e18, Label: "x", Devs: []DevStats{{Dev: 0, NoTorch: true, Allocated: 5}}}, `devs[0]: "no_torch" with torch figures`},
		{OOM{T: 1e18, Framework: "jax", Error: strings.Repeat("x", MaxOOMErrorBytes+1)}, `"error" is 1025 bytes, more than 1024`},
		{Holders{T: 1e18, Frameworks: many(MaxFrameworks + 1)}, `"frameworks" lists 5 frameworks, more than 4`},
		{Holders{T: 1e18, Frameworks: []Framework{{Name: "jax", Held: make([]HolderGroup, MaxFrameworkHeld+1)}}}, `"frameworks[0]" has 17 holder groups, more than 16`},
		{RowHeld{T: 1e18, Frameworks: many(MaxFrameworks + 1)}, `"frameworks" lists 5 frameworks, more than 4`},
	} {
		err := Check(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want %q", c.f, err, c.want)
		}
	}
	if err := Check(FrameworkReading{T: 1e18, Frameworks: many(MaxFrameworks)}); err != nil {
		t.Errorf("within the bounds: %v", err)
	}
}
