package fit

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseValues(t *testing.T) {
	got, err := ParseValues(" 64,16, 32,16 ,128")
	if err != nil || !reflect.DeepEqual(got, []int{16, 32, 64, 128}) {
		t.Fatalf("%v %v", got, err)
	}
	for in, want := range map[string]string{
		"":                             "--values is empty",
		"16,,32":                       `"" (value 2) is not a whole number`,
		"16,x":                         `"x" (value 2)`,
		"0,8":                          `"0" (value 1)`,
		"-4":                           `"-4" (value 1)`,
		"1.5":                          `"1.5"`,
		"2000000000":                   "from 1 to",
		strings.Repeat("1,", 64) + "1": "65 values, at most 64",
	} {
		if _, err := ParseValues(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseValues(%q): %v, want %q", in, err, want)
		}
	}
}

func TestStepIsTheValuesGreatestCommonDivisor(t *testing.T) {
	for _, c := range []struct {
		vals []int
		want int
	}{{[]int{16, 32, 64, 128}, 16}, {[]int{10, 25}, 5}, {[]int{3, 7}, 1}, {[]int{12}, 12}, {nil, 1}} {
		if got := Step(c.vals); got != c.want {
			t.Errorf("Step(%v) = %d, want %d", c.vals, got, c.want)
		}
	}
}

func TestCommandNeedsThePlaceholder(t *testing.T) {
	if err := CheckCommand([]string{"python", "train.py", "--batch-size"}); err == nil || !strings.Contains(err.Error(), "has no {}") {
		t.Fatalf("%v", err)
	}
	if err := CheckCommand(nil); err == nil || !strings.Contains(err.Error(), "want a command") {
		t.Fatalf("%v", err)
	}
	if err := CheckCommand([]string{"python", "train.py", "--batch-size={}"}); err != nil {
		t.Fatal(err)
	}
	got := Expand([]string{"python", "t.py", "--bs={}", "--name", "run-{}-{}"}, 32)
	if !reflect.DeepEqual(got, []string{"python", "t.py", "--bs=32", "--name", "run-32-32"}) {
		t.Fatalf("%q", got)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"16GiB": 16 << 30, "16G": 16 << 30, "16 gib": 16 << 30, "512MiB": 512 << 20, "1.5GiB": 3 << 29,
		"20GB": 20e9, "1048576": 1 << 20, "1TiB": 1 << 40,
	} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "16XB", "-1GiB", "0", "12", "2PiB", "NaN", "1e3GiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) took it", in)
		}
	}
}
