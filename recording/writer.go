// Package recording reads and writes gputop recordings: newline-delimited
// JSON files whose lines are wire frames (see FORMAT.md). A Writer is an
// ingest.Tap, so everything the store takes in while recording ends up in
// the file; Load feeds a recording back into a store through the same
// ingest, so a replay shows what the live gputop showed.
package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// FormatVersion is the recording format written (the header's "v"). Version
// 2 stores agent samples as wire.Samples batches; version 3 says which rows
// end a run (snapshot "end"), with their attribution ("held", and held
// frames for one that came later); Load reads versions 1 to 3.
const FormatVersion = 3

const (
	// batchSpan is how much sample time one NVML batch covers at most, and
	// flushEvery how often pending batches are written even when no sample
	// arrives: a killed recorder loses at most about this much.
	batchSpan  = int64(100 * time.Millisecond)
	flushEvery = 100 * time.Millisecond
	// maxBatch caps the samples of one batch (a source fed faster than real
	// time, e.g. a test or a fast-forward) so a batch line stays far below
	// MaxLineBytes: 4096 samples of at most ~60 bytes are ~250 KiB.
	maxBatch = 4096
	// maxQueue bounds the lines waiting for the disk: with 8 GPUs (80
	// batches/s) about 100 s of a stalled disk, at most ~20 MB. Past it, new
	// lines are dropped and counted instead of blocking the sources or
	// growing memory.
	maxQueue = 8192
)

// CloseWait bounds how long Close waits for the output to take what is
// still queued. A FIFO or pipe whose reader stopped reading (or a hung
// disk) would otherwise keep a recorder that was told to stop running for
// ever; past it, what is left is counted as dropped and Close returns.
const CloseWait = 3 * time.Second

// ErrStalled is the error of a Writer whose output did not take the rest
// within CloseWait of Close: the file ends where it stopped.
var ErrStalled = fmt.Errorf("the output did not take the rest within %v of the end; stopped waiting (what was left is counted as dropped)", CloseWait)

// Writer appends frames to a recording. It implements ingest.Tap. NVML and
// Frame only queue work under a short lock; a goroutine encodes and writes,
// so the 1 kHz sources never wait for the disk.
type Writer struct {
	hdr     []byte // the header line, written by Start
	f       *os.File
	path    string
	regular bool // f is a regular file: it can be synced and cut back
	started bool

	mu       sync.Mutex
	cond     *sync.Cond     // signalled when the goroutine has written a chunk
	pending  []*batch       // open NVML batch per device index; nil when none
	agent    []*sampleBatch // open agent sample batches, one per (pid, device)
	queue    []item         // lines waiting for the goroutine, in tap order
	spare    []item         // the queue's previous backing array, reused
	free     []*batch       // written batches, reused so NVML does not allocate
	noted    Drops          // drops already written in a Dropped line
	latest   int64          // the newest sample time seen (the header's start before any): a Dropped line's t
	enqueued uint64         // items ever put on the queue
	written  uint64         // items the goroutine has finished with
	closed   bool
	gaveUp   bool   // Close stopped waiting for the output (ErrStalled)
	inflight []item // the chunk the goroutine is writing, item next onwards not yet done
	next     int
	err      error
	stats    Stats
	rows     unwritten // rows not written, so that their edits are not either (drops.go)

	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{} // closed when the goroutine returns
	closeD chan struct{} // closed when the first Close returns

	// owned by the goroutine
	buf  []byte
	line bytes.Buffer  // a frame's encoding
	enc  *json.Encoder // writes to line
	off  int64         // end of the last complete line in the file
}

// item is one queued line: an NVML batch, an agent sample batch or a wire
// frame.
type item struct {
	b *batch
	s *sampleBatch
	f any
}

// Create truncates or creates path (mode 0644), writes the header line at
// once and starts the writer goroutine. hdr's Type and V are set here; a zero
// Start becomes now.
func Create(path string, hdr wire.Recording) (*Writer, error) {
	w := NewWriter(hdr)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	if err := w.Start(f, path); err != nil {
		return nil, err
	}
	return w, nil
}

// NewWriter returns a Writer that queues what it is given (up to the queue's
// bound) until Start gives it its output: a recorder installs it before its
// sources start, and opens the file only once they have. hdr's Type and V
// are set here; a zero Start becomes now.
func NewWriter(hdr wire.Recording) *Writer {
	hdr.Type, hdr.V = wire.TypeRecording, FormatVersion
	if hdr.Start == 0 {
		hdr.Start = time.Now().UnixNano()
	}
	line, _ := json.Marshal(hdr) // plain fields only: cannot fail
	w := &Writer{
		hdr:    append(line, '\n'),
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		closeD: make(chan struct{}),
		buf:    make([]byte, 0, 4096),
	}
	w.latest = hdr.Start
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Start writes the header line to f (named path in errors) and starts the
// writer goroutine, which writes what was queued since NewWriter and
// everything after. On an error f is closed.
func (w *Writer) Start(f *os.File, path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		f.Close()
		return fmt.Errorf("recording %s: the writer was already started or closed", path)
	}
	fi, err := f.Stat()
	w.f, w.path, w.regular = f, path, err == nil && fi.Mode().IsRegular()
	if _, err := f.Write(w.hdr); err != nil {
		f.Close()
		return fmt.Errorf("recording %s: %w", path, err)
	}
	w.off = int64(len(w.hdr))
	w.stats.Lines, w.stats.Bytes = 1, uint64(len(w.hdr))
	w.started = true
	go w.run()
	return nil
}

// Path is the file being written.
func (w *Writer) Path() string { return w.path }

// NVML queues one device sample. It is called at 1 kHz per GPU: it appends
// to the device's open batch under a short lock and does not allocate once
// the batch buffers have grown.
func (w *Writer) NVML(dev int, t int64, used, reserved uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || dev < 0 || dev >= store.MaxDevices {
		w.stats.DroppedSamples++
		return
	}
	w.latest = max(w.latest, t)
	for len(w.pending) <= dev {
		w.pending = append(w.pending, nil)
	}
	b := w.pending[dev]
	if b == nil {
		if n := len(w.free); n > 0 {
			b, w.free = w.free[n-1], w.free[:n-1]
		} else {
			b = &batch{}
		}
		b.reset(dev, t, used, reserved)
		w.pending[dev] = b
	} else {
		b.add(t, used, reserved)
	}
	if len(b.dt) >= maxBatch || t-b.t0 >= batchSpan {
		w.seal(dev)
	}
}

// push queues an item and wakes the goroutine. Caller holds mu.
func (w *Writer) push(it item) bool {
	if w.err != nil || len(w.queue) >= maxQueue {
		return false
	}
	w.queue = append(w.queue, it)
	w.enqueued++
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// Frame queues a wire frame (a value or a pointer to one). The ingest calls
// it with its lock held, so it only queues; encoding happens in the goroutine.
//
// Marks are not written (the store has already turned them into
// rows, which are). An oom frame, a row and a device first write
// every pending batch, so loading sees the samples the live store had. An
// OOM's table row is no frame (ingest does not report it): Load gives the
// oom to store.AgentOOM, which makes that row again from the same samples.
func (w *Writer) Frame(f wire.Frame) {
	f, typ := normalize(f)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || typ == "" {
		if typ != "" {
			w.stats.DroppedFrames++
		}
		return
	}
	if v, ok := f.(wire.Sample); ok {
		w.sample(v)
		return
	}
	if e, ok := f.(wire.RowEdit); ok && w.rows.has(e.ID) {
		w.stats.DroppedFrames++ // its row is not in the file: the edit would name none
		return
	}
	if o, ok := f.(wire.Owned); ok && o.FramePID() > 0 {
		// a process's samples go before what it said next (a bye, an
		// ended, a new hello), as they arrived
		w.sealSamples(o.FramePID())
	}
	switch f.(type) {
	case wire.OOM:
		// every sample gputop had before the OOM goes first: loading makes
		// its row again from them (the store records no OOM row)
		w.sealAll()
	case wire.Row:
		// the samples the row's NVML figures were computed from go first,
		// so loading computes the same (rows are rare)
		w.sealAll()
	case wire.Device:
		// device lines must lead straight to the hello that made them (see
		// Load), with no batch between
		w.sealAll()
	}
	if !w.push(item{f: f}) {
		w.stats.DroppedFrames++
		w.rows.add(f)
	}
}

// recorded says whether Frame writes frames of a type: those the table
// (wire.Frames) marks Recorded and not Own. Marks become the store's
// rows, which are written instead; socket control frames are not
// kept; the header and the batches are the writer's own.
func recorded(typ string) bool {
	s, ok := wire.Lookup(typ)
	return ok && s.Recorded && !s.Own
}

// normalize dereferences pointers, fills in the Type field and returns the
// frame type, or "" for values that are not recording frames.
func normalize(f wire.Frame) (wire.Frame, string) {
	if f == nil || !recorded(f.FrameType()) {
		return nil, ""
	}
	return f.Typed(), f.FrameType()
}

// Flush writes every pending batch and queued frame and waits until they
// are in the file. It returns Err(). Before Start it only returns Err().
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		return w.err
	}
	w.sealAll()
	target := w.enqueued
	select {
	case w.wake <- struct{}{}:
	default:
	}
	for w.written < target {
		w.cond.Wait()
	}
	return w.err
}

// Close flushes, syncs (a regular file) and closes the file. Later NVML and
// Frame calls are ignored. It returns the first error of the whole
// recording; calling it again returns the same. A Writer closed before
// Start writes nothing and touches no file.
//
// Close waits at most CloseWait for the output to take what is queued;
// past it, the rest is counted as dropped and the error is ErrStalled.
func (w *Writer) Close() error {
	return w.closeWithin(CloseWait)
}

func (w *Writer) closeWithin(wait time.Duration) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.closeD
		return w.Err()
	}
	defer close(w.closeD)
	w.closed = true
	if !w.started {
		w.queue = nil
		close(w.done)
		w.mu.Unlock()
		return nil
	}
	w.sealAll()
	w.mu.Unlock()
	close(w.quit)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.done: // the goroutine drained the queue
	case <-timer.C:
		w.giveUp()
		// a FIFO or pipe opened non-blocking wakes the goroutine's write
		// with an error; a blocking one is left to it (the process ending
		// closes it)
		w.f.Close()
		return w.Err()
	}
	var serr error
	if w.regular {
		serr = w.f.Sync() // a pipe or FIFO cannot be synced (EINVAL)
	}
	cerr := w.f.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil && serr != nil {
		w.err = fmt.Errorf("recording %s: %w", w.path, serr)
	}
	if w.err == nil && cerr != nil {
		w.err = fmt.Errorf("recording %s: %w", w.path, cerr)
	}
	return w.err
}

// giveUp counts everything the goroutine has not finished with as dropped,
// the line it is writing included (it cannot have reached the reader
// whole), and stops it writing more.
func (w *Writer) giveUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gaveUp = true
	var st Stats
	for _, it := range w.inflight[w.next:] {
		countDropped(&st, it)
	}
	for _, it := range w.queue {
		countDropped(&st, it)
	}
	w.queue, w.inflight = nil, nil
	w.stats.DroppedSamples += st.DroppedSamples
	w.stats.DroppedAgentSamples += st.DroppedAgentSamples
	w.stats.DroppedFrames += st.DroppedFrames
	w.written = w.enqueued
	w.cond.Broadcast()
	if w.err == nil {
		w.err = fmt.Errorf("recording %s: %w", w.path, ErrStalled)
	}
}

// Err returns the first write error (disk full, file too large, ...), or
// nil. After an error nothing more is written and the file is cut back to
// its last complete line, so it stays loadable.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// run is the writer goroutine. A ticker seals open batches every flushEvery,
// so samples reach the file within ~100 ms even when a source stops; a tick
// costs one lock when nothing is pending.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.wake:
		case <-tick.C:
			w.mu.Lock()
			w.sealAll()
			w.mu.Unlock()
		case <-w.quit:
			w.drain()
			return
		}
		w.drain()
	}
}

// drain writes everything queued, one chunk at a time, without holding mu
// during I/O. Before each chunk, and once the queue is empty, it writes a
// Dropped line for what was dropped since the last one. Each line is
// counted as soon as it is written, so Close can give up at any point and
// count the rest.
func (w *Writer) drain() {
	for {
		w.noteDrops()
		w.mu.Lock()
		q := w.queue
		if len(q) == 0 || w.gaveUp {
			w.mu.Unlock()
			return
		}
		w.queue, w.spare = w.spare, nil
		w.inflight, w.next = q, 0
		failed := w.err != nil
		w.mu.Unlock()

		for i := range q {
			var n int
			var err error
			skip := w.editOfUnwritten(q[i])
			if !failed && !skip {
				n, err = w.writeItem(q[i])
			}
			w.mu.Lock()
			if w.gaveUp { // Close has counted this line and the rest
				w.mu.Unlock()
				return
			}
			w.next = i + 1
			if errors.Is(err, errLineTooLong) {
				w.stats.DroppedTooLong++
				err, n = nil, -1
			}
			switch {
			case n < 0: // counted above
			case failed || skip || err != nil || n == 0: // n == 0: could not be encoded
				countDropped(&w.stats, q[i])
			default:
				w.stats.Lines++
				w.stats.Bytes += uint64(n)
				if q[i].b != nil {
					w.stats.Samples += uint64(len(q[i].b.dt))
				}
				if q[i].s != nil {
					w.stats.AgentSamples += uint64(len(q[i].s.dt))
				}
			}
			if n <= 0 {
				w.rows.add(q[i].f) // a row not written: its edits are not either
			}
			if err != nil && w.err == nil {
				w.err = err
			}
			failed = w.err != nil
			w.mu.Unlock()
		}

		w.mu.Lock()
		for i := range q {
			if q[i].b != nil {
				w.free = append(w.free, q[i].b)
			}
			q[i] = item{}
		}
		w.spare, w.inflight = q[:0], nil
		w.written += uint64(len(q))
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// errLineTooLong is writeItem's answer for a frame whose line would be over
// MaxLineBytes: it is dropped and counted (Stats.DroppedTooLong), and
// writing goes on.
var errLineTooLong = errors.New("line over MaxLineBytes")

// writeItem encodes one line and writes it with a single Write call, so a
// killed recorder leaves at most one partial line at the end. It returns
// 0, errLineTooLong for a frame too long to be loaded again, 0, nil for one
// that cannot be encoded. On a write error the file is cut back to its last
// complete line.
func (w *Writer) writeItem(it item) (int, error) {
	if it.b != nil {
		f := it.b.frame()
		w.buf = f.AppendJSON(w.buf[:0])
	} else if it.s != nil {
		f := it.s.frame()
		w.buf = f.AppendJSON(w.buf[:0])
	} else {
		// the canonical encoding the socket server measured the frame in
		// (see MaxLineBytes); Encode adds the newline
		w.line.Reset()
		if w.enc == nil {
			w.enc = json.NewEncoder(&w.line)
			w.enc.SetEscapeHTML(false)
		}
		if err := w.enc.Encode(it.f); err != nil {
			return 0, nil
		}
		w.buf = append(w.buf[:0], w.line.Bytes()[:w.line.Len()-1]...)
	}
	if len(w.buf) > MaxLineBytes {
		return 0, errLineTooLong
	}
	w.buf = append(w.buf, '\n')
	n, err := w.f.Write(w.buf)
	if err != nil {
		if n > 0 && w.regular {
			_ = w.f.Truncate(w.off) // best effort: keep the file loadable
		}
		return 0, fmt.Errorf("recording %s: %w", w.path, err)
	}
	w.off += int64(n)
	return n, nil
}
