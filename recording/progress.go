package recording

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/gputop/gputop/ingest"
)

// Progress tells how far a LoadContext has read, from any goroutine.
type Progress struct {
	read  atomic.Int64
	total atomic.Int64
}

// Bytes returns the bytes read so far and the file's size (0 until known).
func (p *Progress) Bytes() (read, total int64) { return p.read.Load(), p.total.Load() }

// LoadContext is Load through in (see LoadInto) that counts the bytes read
// in p and stops reading once ctx is done: the frames before that stay in
// in's store, and the error wraps
// ctx.Err(). A gigabyte-sized recording takes seconds to load; this lets a
// caller show how far it got and give up when the user does.
func LoadContext(ctx context.Context, path string, in *ingest.Ingest, p *Progress) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, fmt.Errorf("recording: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		p.total.Store(fi.Size())
	}
	return LoadInto(path, &progressReader{ctx: ctx, r: f, p: p}, in)
}

type progressReader struct {
	ctx context.Context
	r   io.Reader
	p   *Progress
}

func (r *progressReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(b)
	r.p.read.Add(int64(n))
	return n, err
}
