package printable

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

func TestClean(t *testing.T) {
	const R = "\uFFFD"
	for _, c := range []struct{ name, in, want string }{
		{"plain", "Epoch 5", "Epoch 5"},
		{"wide and combining kept", "训练 café e\u0301 🌈", "训练 café e\u0301 🌈"},
		{"replacement char kept", "a\uFFFDb", "a\uFFFDb"},
		{"SGR", "a\x1b[31;1mred\x1b[0m", "a" + R + "red" + R},
		{"OSC title with BEL", "a\x1b]0;pwned\x07b", "a" + R + "b"},
		{"OSC with ST", "a\x1b]2;pwned\x1b\\b", "a" + R + "b"},
		{"OSC unterminated runs to the end", "a\x1b]0;pwned", "a" + R},
		{"DCS", "a\x1bPq#0;2;0;0;0#0~~\x1b\\b", "a" + R + "b"},
		{"APC cancelled by CAN", "a\x1b_x\x18b", "a" + R + "b"},
		{"string ended by another ESC", "a\x1b]0;x\x1b[2Jb", "a" + R + R + "b"},
		{"CSI private", "a\x1b[?1049hb", "a" + R + "b"},
		{"CSI cut by a control", "a\x1b[31\nb", "a" + R + " b"},
		{"two-character escape", "a\x1bcb\x1b(Bc", "a" + R + "b" + R + "c"},
		{"ESC at the end", "a\x1b", "a" + R},
		{"C1 CSI", "a\u009b31mb", "a" + R + "b"},
		{"C1 OSC with C1 ST", "a\u009d0;x\u009cb", "a" + R + "b"},
		{"C1 control", "a\u0085b", "a" + R + "b"},
		{"C0 and DEL", "a\x00b\x07c\x7fd", "a" + R + "b" + R + "c" + R + "d"},
		{"tab newline CR", "a\tb\nc\r\u2028d", "a b c  d"},
		{"not UTF-8", "a\xffb\xc2", "a" + R + "b" + R},
		{"bidi override", "abc\u202Edef", "abc" + R + "def"},
		{"bidi isolates and marks", "\u2066a\u2069\u200e\u200f\u061c", R + "a" + R + R + R + R},
		{"BOM", "\uFEFFlabel", "label"},
		{"ZWJ sequence", "👨\u200d👩\u200d👧", "👨👩👧"},
		{"rainbow flag", "🏳\uFE0F\u200d🌈", "🏳🌈"},
		{"emoji presentation", "\u2764\uFE0F", "\u2764"},
		{"skin tone", "👍\U0001F3FD", "👍"},
		{"zero-width space, joiner, soft hyphen, tag", "a\u200bb\u2060c\u00add\U000E0041e", "abcde"},
	} {
		if got := Clean(c.in); got != c.want {
			t.Errorf("%s: Clean(%+q) = %+q, want %+q", c.name, c.in, got, c.want)
		}
	}
}

// What the table measures (lipgloss: grapheme clusters) and what the
// renderer and tmux draw (wcwidth) agree once the text is clean.
func TestCleanWidthAgrees(t *testing.T) {
	for _, in := range []string{
		"👨\u200d👩\u200d👧 boot", "\uFEFFstart", "a\u202Eb", "\u2764\uFE0F ok", "👍\U0001F3FD",
		"🏳\uFE0F\u200d🌈", "1\uFE0F\u20E3", "a\u200bb", "x\u00ady", "e\u0301", "\U0001F3F4\U000E0067\U000E0062\U000E007F",
	} {
		raw, clean := in, Clean(in)
		if g, w := ansi.StringWidth(clean), ansi.StringWidthWc(clean); g != w {
			t.Errorf("%+q cleaned to %+q: lipgloss width %d, wcwidth %d", raw, clean, g, w)
		}
	}
}

func TestCleanReturnsCleanTextAsIs(t *testing.T) {
	s := "train.py --epochs 10 训练"
	if n := testing.AllocsPerRun(100, func() { Clean(s) }); n != 0 {
		t.Fatalf("%v allocations for text that needs no change", n)
	}
}

// FuzzClean checks the rule's promises on any input: valid UTF-8, no byte a
// terminal acts on, nothing the rule removes, and cleaning twice changes
// nothing.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "a\x1b[31mb", "\x1b]0;t\x07", "\x1bP\x1b\\", "\u009b1m", "\xff\xfe", "👨\u200d👩", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Clean(s)
		if !utf8.ValidString(c) {
			t.Fatalf("Clean(%+q) = %+q: not UTF-8", s, c)
		}
		for _, r := range c {
			if r < 0x20 || (r >= 0x7f && r < 0xa0) || bidi(r) || removed(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("Clean(%+q) = %+q keeps %U", s, c, r)
			}
		}
		if strings.ContainsRune(c, 0x1b) {
			t.Fatalf("Clean(%+q) keeps ESC", s)
		}
		if cc := Clean(c); cc != c {
			t.Fatalf("Clean is not idempotent: %+q -> %+q -> %+q", s, c, cc)
		}
	})
}
