package runner

import (
	"sync"
	"unicode/utf8"

	"github.com/gputop/gputop/printable"
)

// Output keeps the command's output as a terminal would show it, line by
// line, for the output pane: a carriage return starts the line again (a
// progress bar redraws in place), backspace steps back, a tab goes to the
// next multiple of 8, erase-to-end-of-line works, and every other escape
// sequence and control character is dropped; what is left goes through
// printable.Clean. It keeps the last Keep lines (0: MaxLines) of at most
// MaxLineRunes runes each. Safe for concurrent use: the pty reader writes,
// the UI reads.
type Output struct {
	Keep int // set before the first Write

	mu      sync.Mutex
	lines   []string // finished lines, oldest first (a ring once full)
	first   int      // index of the oldest line in lines once full
	dropped int      // lines that fell off the front
	cur     []rune   // the line being written
	col     int      // the cursor in cur
	esc     escState
	partial []byte // the start of a UTF-8 sequence split across writes
	gen     uint64
}

// The most the pane can scroll back, and the widest line kept.
const (
	MaxLines     = 10000
	MaxLineRunes = 4096
)

type escState int

const (
	escNone      escState = iota
	escStart              // ESC seen
	escCSI                // ESC [ ... until a final byte
	escString             // ESC ] / P / X / ^ / _ ... until BEL or ESC \
	escStringEsc          // ESC inside a string: ST if a backslash follows
)

// Write takes the command's bytes; it never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	if len(o.partial) > 0 {
		p = append(o.partial, p...)
		o.partial = nil
	}
	var csi []byte
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 && !utf8.FullRune(p) {
			o.partial = append([]byte(nil), p...)
			break
		}
		p = p[size:]
		switch o.esc {
		case escStart:
			switch r {
			case '[':
				o.esc, csi = escCSI, csi[:0]
			case ']', 'P', 'X', '^', '_':
				o.esc = escString
			default:
				o.esc = escNone // a two-character escape
			}
			continue
		case escCSI:
			if r >= 0x40 && r <= 0x7e {
				o.esc = escNone
				if r == 'K' && (len(csi) == 0 || string(csi) == "0") {
					o.cur = o.cur[:min(o.col, len(o.cur))]
				}
			} else {
				csi = append(csi, byte(r))
			}
			continue
		case escString:
			switch r {
			case 0x07:
				o.esc = escNone
			case 0x1b:
				o.esc = escStringEsc
			}
			continue
		case escStringEsc:
			o.esc = escString
			if r == '\\' {
				o.esc = escNone
			}
			continue
		}
		switch r {
		case 0x1b:
			o.esc = escStart
		case '\n':
			o.endLine()
		case '\r':
			o.col = 0
		case '\b':
			o.col = max(o.col-1, 0)
		case '\t':
			for o.put(' '); o.col%8 != 0; {
				o.put(' ')
			}
		default:
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				continue // controls draw nothing
			}
			o.put(r)
		}
	}
	o.gen++
	return n, nil
}

func (o *Output) put(r rune) {
	if o.col >= MaxLineRunes {
		return
	}
	if o.col < len(o.cur) {
		o.cur[o.col] = r
	} else {
		o.cur = append(o.cur, r)
	}
	o.col++
}

func (o *Output) endLine() {
	line := printable.Clean(string(o.cur))
	o.cur, o.col = o.cur[:0], 0
	keep := o.Keep
	if keep <= 0 {
		keep = MaxLines
	}
	if len(o.lines) < keep {
		o.lines = append(o.lines, line)
		return
	}
	o.lines[o.first] = line
	o.first = (o.first + 1) % keep
	o.dropped++
}

// Len is how many lines there are to show (the unfinished one included).
func (o *Output) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.len()
}

func (o *Output) len() int {
	n := len(o.lines)
	if len(o.cur) > 0 {
		n++
	}
	return n
}

// Gen moves whenever something was written.
func (o *Output) Gen() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gen
}

// Tail returns n lines ending back lines before the newest one (back 0:
// the newest lines), and the number of lines in all.
func (o *Output) Tail(back, n int) ([]string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := o.len()
	end := max(total-back, 0)
	start := max(end-n, 0)
	out := make([]string, 0, end-start)
	for i := start; i < end; i++ {
		if i < len(o.lines) {
			out = append(out, o.lines[(o.first+i)%len(o.lines)])
		} else {
			out = append(out, printable.Clean(string(o.cur)))
		}
	}
	return out, total
}
