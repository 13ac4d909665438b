package fit

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Placeholder is what each value replaces in the command.
const Placeholder = "{}"

// MaxValues bounds --values: each value is a child run, and --verify adds
// two more.
const MaxValues = 64

// MaxValue bounds each value, so that value × bytes per value stays exact
// in a float64 and every step of the search is an int.
const MaxValue = 1 << 30

// ParseValues reads --values: positive integers separated by commas,
// each at most MaxValue, at most MaxValues of them. They come back sorted,
// each once.
func ParseValues(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("--values is empty: want positive integers separated by commas, e.g. 16,32,64")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxValues {
		return nil, fmt.Errorf("--values: %d values, at most %d", len(parts), MaxValues)
	}
	seen := map[int]bool{}
	var out []int
	for i, p := range parts {
		p = strings.TrimSpace(p)
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > MaxValue {
			return nil, fmt.Errorf("--values: %q (value %d) is not a whole number from 1 to %d", p, i+1, MaxValue)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Step is the spacing of the values a prediction may name: the greatest
// common divisor of the values given (16,32,64 → 16; 10,25 → 5), so a
// prediction stays on the grid the user chose (a batch that is a multiple
// of 8, say).
func Step(values []int) int {
	g := 0
	for _, v := range values {
		g = gcd(g, v)
	}
	return max(g, 1)
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// CheckCommand says what is wrong with the command template: it must name
// a program and hold Placeholder somewhere.
func CheckCommand(argv []string) error {
	if len(argv) == 0 {
		return errors.New("want a command: gputop fit --values V1,V2,... -- CMD ARGS... (with {} where each value goes)")
	}
	for _, a := range argv {
		if strings.Contains(a, Placeholder) {
			return nil
		}
	}
	return fmt.Errorf("the command %q has no %s: put %s where each value goes, e.g. -- python train.py --batch-size %s",
		strings.Join(argv, " "), Placeholder, Placeholder, Placeholder)
}

// Expand is argv with every Placeholder replaced by v.
func Expand(argv []string, v int) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, Placeholder, strconv.Itoa(v))
	}
	return out
}

// ParseBytes reads a memory size: a number with an optional unit, B, KiB,
// MiB, GiB, TiB (K, M, G, T mean the same), or KB, MB, GB, TB (powers of
// ten): "16GiB", "20G", "512MiB", "1.5GiB", "17179869184".
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult := map[string]float64{
		"": 1, "B": 1,
		"K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TIB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	}[strings.ToUpper(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || !(f > 0) {
		return 0, fmt.Errorf("%q is not a memory size: want a number and a unit, e.g. 16GiB, 512MiB, 20GB", s)
	}
	b := f * mult
	if b < 1<<20 || b > 1<<50 || math.IsInf(b, 0) {
		return 0, fmt.Errorf("%q: want 1 MiB to 1 PiB", s)
	}
	return uint64(b), nil
}
