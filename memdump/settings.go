package memdump

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nlpodyssey/gopickle/types"
)

// Settings are the caching allocator's settings as a dump gives them
// (allocator_settings in torch.cuda.memory._snapshot(), recent torch:
// expandable_segments, max_split_size, garbage_collection_threshold,
// roundup_power2_divisions, the PYTORCH_CUDA_ALLOC_CONF string...), in
// the dump's order, each value written as Python writes it. A dump is
// outside input: at most maxSettings keys are kept, a key or value
// longer than maxSettingKey or maxSettingValue bytes is cut.
type Settings struct {
	Entries []Setting
	More    int // keys past maxSettings, left out
}

// Setting is one allocator setting; both strings are still the dump's
// text (made printable only when written out).
type Setting struct {
	Key, Value string
	Cut        bool // the key or the value was cut ("…")
}

// The most a dump's settings keep: keys, and the bytes of a key and of
// a value (PYTORCH_CUDA_ALLOC_CONF can be long: the text wraps it).
const (
	maxSettings     = 32
	maxSettingKey   = 40
	maxSettingValue = 256
)

// settings reads allocator_settings: a dict, or an error saying what it
// is instead.
func (w *walker) settings(v any) (*Settings, error) {
	d, ok := v.(*types.Dict)
	if !ok {
		return nil, fmt.Errorf("\"allocator_settings\" is %s, not a dict", typeName(v))
	}
	if err := w.visit(len(*d)); err != nil {
		return nil, err
	}
	s := &Settings{}
	for _, e := range *d {
		if len(s.Entries) == maxSettings {
			s.More = len(*d) - maxSettings
			break
		}
		k, ok := e.Key.(string)
		if !ok {
			var err error
			if k, err = w.python(e.Key, maxSettingKey); err != nil {
				return nil, err
			}
		}
		val, err := w.python(e.Value, maxSettingValue)
		if err != nil {
			return nil, err
		}
		var c bool
		if len(k) > maxSettingKey {
			k, c = cut(k, maxSettingKey), true
		}
		if len(val) > maxSettingValue {
			val, c = cut(val, maxSettingValue), true
		}
		s.Entries = append(s.Entries, Setting{Key: k, Value: val, Cut: c})
	}
	return s, nil
}

// cut is s cut to at most n bytes on a rune boundary, with "…".
func cut(s string, n int) string {
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// python writes a value as Python's repr would (strings in double
// quotes, escaped), stopping once it is longer than limit bytes: a value
// nested or repeated by the thousand costs what is written, each element
// a visit.
func (w *walker) python(v any, limit int) (string, error) {
	var b strings.Builder
	var put func(v any) error
	put = func(v any) error {
		if b.Len() > limit {
			return nil
		}
		if err := w.visit(1); err != nil {
			return err
		}
		switch x := v.(type) {
		case nil:
			b.WriteString("None")
		case bool:
			b.WriteString(map[bool]string{true: "True", false: "False"}[x])
		case int:
			b.WriteString(strconv.Itoa(x))
		case *big.Int:
			b.WriteString(x.String()) // the guard holds integers to 80 digits
		case float64:
			b.WriteString(pyFloat(x))
		case string:
			if len(x) > limit { // the quoted text is cut anyway
				x = x[:limit+1]
			}
			if err := w.visit(len(x) / 256); err != nil {
				return err
			}
			b.WriteString(strconv.Quote(x))
		case *types.List:
			return seq(&b, "[", "]", *x, put, limit)
		case *types.Tuple:
			return seq(&b, "(", ")", *x, put, limit)
		case *types.Dict:
			b.WriteString("{")
			for i, e := range *x {
				if b.Len() > limit {
					break
				}
				if i > 0 {
					b.WriteString(", ")
				}
				if err := put(e.Key); err != nil {
					return err
				}
				b.WriteString(": ")
				if err := put(e.Value); err != nil {
					return err
				}
			}
			b.WriteString("}")
		default:
			b.WriteString("<" + typeName(v) + ">")
		}
		return nil
	}
	err := put(v)
	return b.String(), err
}

func seq(b *strings.Builder, open, close string, l []any, put func(any) error, limit int) error {
	b.WriteString(open)
	for i, v := range l {
		if b.Len() > limit {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if err := put(v); err != nil {
			return err
		}
	}
	b.WriteString(close)
	return nil
}

// pyFloat is a float as Python writes it: 0.0, 0.6, 1e+20, inf, nan.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
