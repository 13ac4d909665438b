// Package printable holds the one rule by which text from outside gputop
// (agent frames, recordings, file names, NVML process and device names) is
// made safe to draw: no byte of it can drive the terminal, and its width as
// lipgloss measures it (grapheme clusters) is the width that Bubble Tea's
// renderer and the terminal give it (wcwidth).
//
// Clean applies the rule:
//
//   - An escape sequence, introduced by ESC or by its one-character C1 form
//     (CSI U+009B, OSC U+009D, DCS U+0090, SOS U+0098, PM U+009E, APC U+009F),
//     becomes one U+FFFD as a whole: the CSI's parameters and final byte, an
//     OSC/DCS/SOS/PM/APC string up to its BEL or ST (an unterminated one runs
//     to the end of the text, as a terminal would take it), or the
//     intermediates and final byte of a two-character escape.
//   - Tab, newline, carriage return and the line and paragraph separators
//     U+2028/U+2029 become a space, so a row stays one line.
//   - Every other C0 control, DEL and C1 control becomes U+FFFD, and so does
//     a byte that is not UTF-8.
//   - The bidirectional controls (U+202A..U+202E, U+2066..U+2069, U+200E,
//     U+200F, U+061C) become U+FFFD: they would reorder what is drawn around
//     them, and the U+FFFD shows that something was there.
//   - Zero-width characters that join or restyle what surrounds them are
//     removed: ZWJ U+200D, ZWNJ U+200C, BOM U+FEFF and every other format
//     character (Unicode category Cf: U+200B, U+2060, soft hyphen U+00AD,
//     tags, ...), variation selectors (emoji presentation U+FE0F among them)
//     and the emoji skin-tone modifiers U+1F3FB..U+1F3FF. lipgloss counts an
//     emoji ZWJ sequence as one two-cell cluster where wcwidth counts each of
//     its emoji, so it would shift the rest of its table row; without its
//     joiners the sequence is its emoji side by side (👨‍👩‍👧 becomes 👨👩👧,
//     six cells to both), ❤️ becomes ❤ and 👍🏽 becomes 👍.
//
// Everything else, combining marks and wide characters included, is kept,
// also where lipgloss and wcwidth still measure a cluster differently
// (spacing vowel signs of Devanagari or Thai, conjoining Hangul jamo):
// taking those out would change the text, not only how it is drawn.
package printable

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Replacement stands in for what was taken out.
const Replacement = '\uFFFD'

// Clean returns s made printable by the rule above. Text that needs no
// change is returned as it is, without allocating.
func Clean(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1: // not UTF-8
			b.WriteRune(Replacement)
		case r == 0x1b:
			n = escapeLen(s[i:])
			b.WriteRune(Replacement)
		case c1Introducer(r):
			n = sequenceLen(s[i:], n, r)
			b.WriteRune(Replacement)
		case r == '\t' || r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029':
			b.WriteByte(' ')
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || bidi(r):
			b.WriteRune(Replacement)
		case removed(r):
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe is the byte offset of the first rune Clean changes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || r < 0xa0 || r == '\u2028' || r == '\u2029' || bidi(r) || removed(r) {
			return i
		}
		i += n
	}
	return -1
}

// bidi reports the bidirectional formatting characters.
func bidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x200e || r == 0x200f || r == 0x061c
}

// removed reports the zero-width characters Clean drops.
func removed(r rune) bool {
	switch {
	case r < 0xad:
		return false
	case r >= 0x1f3fb && r <= 0x1f3ff: // emoji modifiers (skin tones)
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r)
}

// c1Introducer reports the C1 controls that open a sequence.
func c1Introducer(r rune) bool {
	switch r {
	case 0x9b, 0x9d, 0x90, 0x98, 0x9e, 0x9f:
		return true
	}
	return false
}

// escapeLen is the length of the escape sequence at the start of s (s[0]
// is ESC), at least 1.
func escapeLen(s string) int {
	if len(s) < 2 {
		return 1
	}
	switch s[1] {
	case '[':
		return sequenceLen(s, 2, 0x9b)
	case ']':
		return sequenceLen(s, 2, 0x9d)
	case 'P':
		return sequenceLen(s, 2, 0x90)
	case 'X', '^', '_':
		return sequenceLen(s, 2, 0x98)
	}
	// a two-character escape (or nF): intermediates, then one final byte
	i := 1
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// sequenceLen is the length of the sequence of kind intro (its C1 form)
// whose body starts at s[body:].
func sequenceLen(s string, body int, intro rune) int {
	i := body
	if intro == 0x9b { // CSI: parameters and intermediates, then a final byte
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
			i++
		}
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
			i++
		}
		return i
	}
	// a control string: up to BEL, ST (ESC \ or U+009C), or CAN/SUB, which
	// cancel it; another ESC ends it and starts a sequence of its own
	for i < len(s) {
		switch c := s[i]; {
		case c == 0x07 || c == 0x18 || c == 0x1a:
			return i + 1
		case c == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i
		case c == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c:
			return i + 2
		}
		i++
	}
	return i
}
