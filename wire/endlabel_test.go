package wire

import (
	"encoding/json"
	"os"
	"testing"
)

// The rule is held to the labels the agent's tests check too.
func TestIsEndLabelVectors(t *testing.T) {
	b, err := os.ReadFile("../testdata/protocol/end_labels.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ End, NotEnd []string }
	if err := json.Unmarshal(b, &struct {
		End    *[]string `json:"end"`
		NotEnd *[]string `json:"not_end"`
	}{&v.End, &v.NotEnd}); err != nil {
		t.Fatal(err)
	}
	if len(v.End) == 0 || len(v.NotEnd) == 0 {
		t.Fatal("end_labels.json has no labels")
	}
	for _, l := range v.End {
		if !IsEndLabel(l) {
			t.Errorf("IsEndLabel(%q) = false, want true", l)
		}
	}
	for _, l := range v.NotEnd {
		if IsEndLabel(l) {
			t.Errorf("IsEndLabel(%q) = true, want false", l)
		}
	}
}
