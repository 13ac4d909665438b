package agentlink

import (
	"bytes"
	"errors"
	"io"
)

var (
	// errTooLong: a line passed the limit before its newline arrived.
	errTooLong = errors.New("line too long")
	// errCutOff: the peer went away in the middle of a line.
	errCutOff = errors.New("connection ended in the middle of a line")
)

// lineBufSize is what a reader may hold of a line without asking the
// server's lineBudget; it starts at lineStartSize, which holds an agent's
// usual frames, so that an idle connection costs little.
const (
	lineBufSize   = 64 << 10
	lineStartSize = 4 << 10
)

// lineReader reads "\n"-terminated lines of at most limit bytes (newline not
// counted). It reports a line as too long as soon as limit+1 bytes without a
// newline have arrived, without waiting for more: bufio.Reader would block
// for the rest of the line, and a peer could make gputop wait forever.
type lineReader struct {
	r          io.Reader
	limit      int
	buf        []byte
	start, end int // unread data is buf[start:end]
	scanned    int // bytes after start already searched for '\n'
	err        error

	// budget, when set, must grant every byte of buf past lineBufSize;
	// onEvict is called (from any goroutine) when the budget takes them
	// back by closing this reader: it holds held bytes, the budget limit.
	budget  *lineBudget
	onEvict func(held, limit int)
	evicted bool // guarded by budget.mu
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: r, limit: limit, buf: make([]byte, min(lineStartSize, limit+1))}
}

// next returns the next line without its newline; the slice is valid until
// the following call.
func (l *lineReader) next() ([]byte, error) {
	if l.start == l.end {
		l.start, l.end, l.scanned = 0, 0, 0
		if len(l.buf) > lineBufSize {
			l.buf = make([]byte, lineBufSize) // do not keep one long line's buffer
			l.release()
		}
	}
	for {
		if i := bytes.IndexByte(l.buf[l.start+l.scanned:l.end], '\n'); i >= 0 {
			n := l.scanned + i
			if n > l.limit {
				return nil, errTooLong
			}
			line := l.buf[l.start : l.start+n]
			l.start += n + 1
			l.scanned = 0
			return line, nil
		}
		l.scanned = l.end - l.start
		if l.scanned > l.limit {
			return nil, errTooLong
		}
		if l.err != nil {
			if errors.Is(l.err, io.EOF) && l.scanned > 0 {
				return nil, errCutOff
			}
			return nil, l.err
		}
		if l.end == len(l.buf) {
			if l.start > 0 {
				copy(l.buf, l.buf[l.start:l.end])
				l.end -= l.start
				l.start = 0
			} else {
				// Full of one unfinished line: grow, up to limit+1 bytes,
				// enough to hold a line at the limit with its newline.
				n := min(2*len(l.buf), l.limit+1)
				if extra := n - max(len(l.buf), lineBufSize); l.budget != nil && extra > 0 && !l.budget.grow(l, extra) {
					return nil, errOverBudget
				}
				nb := make([]byte, n)
				copy(nb, l.buf[:l.end])
				l.buf = nb
			}
		}
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		if err != nil {
			l.err = err // handed out once the data read with it is used up
		}
	}
}

// release gives back what the reader holds of its budget; call it when the
// connection ends.
func (l *lineReader) release() {
	if l.budget != nil {
		l.budget.release(l)
	}
}
