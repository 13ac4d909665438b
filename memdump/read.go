// Package memdump reads the memory snapshots PyTorch's caching allocator
// writes (torch.cuda.memory._snapshot() pickled: the files
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
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/nlpodyssey/gopickle/pickle"
)

// ReadError says why a file is not a readable snapshot and where: Offset
// is the byte at which decoding stopped, counted from 0 (the last byte the
// decoder read: an unknown opcode's own byte); for a file cut short, the
// file's size.
type ReadError struct {
	Path      string
	Offset    int64
	Size      int64 // the file's size; -1 when not known
	Truncated bool  // the file ends inside the pickle
	Err       error
}

func (e *ReadError) Error() string {
	where := e.Path
	if where == "" {
		where = "snapshot"
	}
	if e.Truncated {
		return fmt.Sprintf("%s: truncated at byte %d: the pickle ends before its STOP opcode (a dump cut off while it was written?)",
			where, e.Offset)
	}
	return fmt.Sprintf("%s: not a readable pickle at byte %d: %v", where, e.Offset, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// countingReader counts the bytes the unpickler has taken.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// ReadFile decodes and sums up the snapshot in path.
func ReadFile(path string) (*Dump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	v, err := decode(f, path, size)
	if err != nil {
		return nil, err
	}
	d, err := summarise(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Path, d.Bytes = path, size
	return d, nil
}

// Read decodes and sums up a snapshot read from r.
func Read(r io.Reader) (*Dump, error) {
	v, err := decode(r, "", -1)
	if err != nil {
		return nil, err
	}
	return summarise(v)
}

// decode unpickles one value. A corrupt file can make the unpickler index
// past what it read: that panic is an error at the offset reached, too.
func decode(r io.Reader, path string, size int64) (v any, err error) {
	cr := &countingReader{r: bufio.NewReaderSize(r, 1<<20)}
	u := pickle.NewUnpickler(cr)
	u.FindClass = findClass
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, &ReadError{Path: path, Offset: stopped(cr, &u), Size: size,
				Err: fmt.Errorf("malformed data (%v)", p)}
		}
	}()
	v, err = u.Load()
	if err == nil {
		return v, nil
	}
	truncated := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		err.Error() == "pickle exhausted before end of frame"
	off := cr.n // cut short: all of it was read
	if !truncated {
		off = stopped(cr, &u)
	}
	return nil, &ReadError{Path: path, Offset: off, Size: size, Truncated: truncated, Err: err}
}

// stopped is the offset of the last byte the unpickler decoded.
func stopped(cr *countingReader, u *pickle.Unpickler) int64 {
	return max(cr.n-frameLeft(u)-1, 0)
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

// findClass refuses every class: a torch snapshot is made of dicts, lists,
// strings and numbers only, so a file naming a class is no snapshot.
func findClass(module, name string) (any, error) {
	return nil, fmt.Errorf("names the class %s.%s: a torch memory snapshot holds plain dicts and lists only", module, name)
}
