// Package memdump reads the dumps of PyTorch's caching allocator (what
// torch.cuda.memory._snapshot() returns, pickled: the files
// pytorch.org/memory_viz opens, and the dumps gputop's agent writes) and
// sums them up: the live blocks grouped by the Python frame that allocated
// them, each device's segments (reserved against allocated, the free
// blocks left between), and for a dump taken at an out-of-memory error the
// request that failed and the largest free block at that moment.
//
// The pickle is decoded by github.com/nlpodyssey/gopickle, which builds
// plain values and runs nothing: a class named in the file becomes an
// inert placeholder, never code.
package memdump

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"syscall"

	"github.com/nlpodyssey/gopickle/pickle"
)

// ReadError says why a file is not a readable dump and where: Offset
// is the byte at which decoding stopped, counted from 0 (the last byte the
// decoder read: an unknown opcode's own byte); for a file cut short, the
// file's size.
type ReadError struct {
	Path      string
	Offset    int64
	Size      int64 // the file's size
	Truncated bool  // the file ends inside the pickle
	Err       error
}

func (e *ReadError) Error() string {
	where := e.Path
	if where == "" {
		where = "dump"
	}
	if e.Truncated {
		why := "the pickle ends before its STOP opcode"
		var o *overrun
		if errors.As(e.Err, &o) {
			why = o.Error()
		}
		return fmt.Sprintf("%s: truncated at byte %d: %s (a dump cut off while it was written?)", where, e.Offset, why)
	}
	return fmt.Sprintf("%s: not a readable pickle at byte %d: %v", where, e.Offset, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// ReadFile decodes and sums up the dump in path, within the budget
// (budget.go); ctx ends the read early.
func ReadFile(ctx context.Context, path string) (*Dump, error) {
	// O_NONBLOCK: a FIFO named as a dump must not block the open
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): a memory dump is a file torch wrote", path, kind(st.Mode()))
	}
	// the file as it is now: a dump still growing is read to this size
	d, err := read(ctx, io.LimitReader(f, st.Size()), path, st.Size(), nil)
	if err != nil {
		return nil, err
	}
	d.Path = path
	return d, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// cost is what a read cost: the allocation the guard estimated for
// decoding, and the summary's visits.
type cost struct{ estimate, visits int64 }

// read decodes and sums up the size bytes of a dump read from r; c,
// when given, gets what that cost.
func read(ctx context.Context, r io.Reader, path string, size int64, c *cost) (*Dump, error) {
	if c == nil {
		c = &cost{}
	}
	v, err := decode(ctx, r, path, size, c)
	if err != nil {
		return nil, err
	}
	d, err := summariseSafely(ctx, v, size, c)
	if err != nil {
		var be *BudgetError
		if errors.As(err, &be) {
			be.Path = path
			return nil, be
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Bytes = size
	return d, nil
}

// summariseSafely is summarise, with a panic (a bug: no file should make
// one) an error rather than the end of the TUI.
func summariseSafely(ctx context.Context, v any, size int64, c *cost) (d *Dump, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("internal error summing it up (%v)", p)
		}
	}()
	return summarise(ctx, v, size, c)
}

// decode unpickles one value through a guard. A corrupt file can make the
// unpickler index past what it read: that panic is an error at the offset
// reached, too.
func decode(ctx context.Context, r io.Reader, path string, size int64, c *cost) (v any, err error) {
	g := newGuard(ctx, bufio.NewReaderSize(r, int(min(max(size, 16), 1<<20))), size)
	defer func() { c.estimate = g.cost }()
	u := pickle.NewUnpickler(g)
	u.FindClass = findClass
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, &ReadError{Path: path, Offset: stopped(g, &u), Size: size,
				Err: fmt.Errorf("malformed data (%v)", p)}
		}
	}()
	v, err = u.Load()
	if g.err != nil { // the guard refused: it says why and where
		switch e := g.err.(type) {
		case *ReadError:
			e.Path = path
		case *BudgetError:
			e.Path = path
		default:
			return nil, fmt.Errorf("%s: %w", path, g.err) // cancelled
		}
		return nil, g.err
	}
	if err == nil {
		return v, nil
	}
	truncated := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		err.Error() == "pickle exhausted before end of frame"
	off := g.off // cut short: all of it was read
	if !truncated {
		off = stopped(g, &u)
	}
	return nil, &ReadError{Path: path, Offset: off, Size: size, Truncated: truncated, Err: err}
}

// stopped is the offset of the last byte the unpickler decoded.
func stopped(g *guard, u *pickle.Unpickler) int64 {
	return max(g.off-frameLeft(u)-1, 0)
}

// frameLeft is how many bytes of the unpickler's current frame (protocol
// 4 and later read 64 KiB frames at once) it has not decoded yet, so that
// an error's offset is where decoding stopped, not the frame's end. 0 when
// the library keeps no frame (its field is looked up by name: a later
// version without it gives the frame's end instead).
func frameLeft(u *pickle.Unpickler) int64 {
	f := reflect.ValueOf(u).Elem().FieldByName("currentFrame")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() || f.Type() != reflect.TypeFor[*bytes.Reader]() {
		return 0
	}
	return int64((*bytes.Reader)(f.UnsafePointer()).Len())
}

// findClass refuses every class: a torch dump is made of dicts, lists,
// strings and numbers only, so a file naming a class is no dump.
func findClass(module, name string) (any, error) {
	return nil, fmt.Errorf("names the class %s.%s: a torch memory dump holds plain dicts and lists only", module, name)
}
