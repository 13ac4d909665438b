// The batches a recording keeps samples in: NVML's per device and the
// agents' per process and device, delta-encoded, one line each 100 ms.

package recording

import "github.com/gputop/gputop/wire"

// sampleBatch accumulates one agent process's samples of one device,
// delta-encoded as they come (see wire.Samples).
type sampleBatch struct {
	pid, dev  int
	t0, lastT int64
	last      [8]uint64
	dt        []int64
	vals      [8][]int64
}

func newSampleBatch(pid int, s wire.Sample) *sampleBatch {
	b := &sampleBatch{pid: pid, dev: s.Dev, t0: s.T, lastT: s.T, dt: []int64{0}}
	b.last = s.Counters()
	for i, v := range b.last {
		b.vals[i] = []int64{int64(v)}
	}
	return b
}

func (b *sampleBatch) add(s wire.Sample) {
	b.dt = append(b.dt, s.T-b.lastT)
	c := s.Counters()
	for i, v := range c {
		b.vals[i] = append(b.vals[i], int64(v-b.last[i]))
	}
	b.lastT, b.last = s.T, c
}

// batch accumulates one device's NVML samples, delta-encoded as they come
// (see wire.NVML), so sealing it costs nothing.
type batch struct {
	dev            int
	t0, lastT      int64
	lastU, lastR   uint64
	dt, used, resv []int64
}

func (b *batch) reset(dev int, t int64, used, reserved uint64) {
	b.dev, b.t0, b.lastT, b.lastU, b.lastR = dev, t, t, used, reserved
	b.dt = append(b.dt[:0], 0)
	b.used = append(b.used[:0], int64(used))
	b.resv = append(b.resv[:0], int64(reserved))
}

// add appends one sample. Deltas use wrapping arithmetic, so every uint64
// value round-trips exactly.
func (b *batch) add(t int64, used, reserved uint64) {
	b.dt = append(b.dt, t-b.lastT)
	b.used = append(b.used, int64(used-b.lastU))
	b.resv = append(b.resv, int64(reserved-b.lastR))
	b.lastT, b.lastU, b.lastR = t, used, reserved
}

// seal moves a device's open batch to the queue. Caller holds mu.
func (w *Writer) seal(dev int) {
	b := w.pending[dev]
	if b == nil {
		return
	}
	w.pending[dev] = nil
	if !w.push(item{b: b}) {
		w.stats.DroppedSamples += uint64(len(b.dt))
		w.free = append(w.free, b)
	}
}

func (w *Writer) sealAll() {
	for dev := range w.pending {
		w.seal(dev)
	}
	w.sealSamples(0)
}

// sealSamples moves the open agent sample batches of pid (of every process
// when pid is 0) to the queue, so that they are written before the frame
// about to be queued. Caller holds mu.
func (w *Writer) sealSamples(pid int) {
	keep := w.agent[:0]
	for _, b := range w.agent {
		if pid != 0 && b.pid != pid {
			keep = append(keep, b)
			continue
		}
		if !w.push(item{s: b}) {
			w.stats.DroppedAgentSamples += uint64(len(b.dt))
		}
	}
	clear(w.agent[len(keep):])
	w.agent = keep
}

// sample adds an agent sample to its process's open batch for its device.
// Caller holds mu.
func (w *Writer) sample(v wire.Sample) {
	w.latest = max(w.latest, v.T)
	var b *sampleBatch
	for _, x := range w.agent {
		if x.pid == v.PID && x.dev == v.Dev {
			b = x
			break
		}
	}
	if b == nil {
		w.agent = append(w.agent, newSampleBatch(v.PID, v))
		return
	}
	b.add(v)
	if len(b.dt) >= maxBatch || v.T-b.t0 >= batchSpan {
		w.sealSamples(v.PID)
	}
}

// frame is the batch as its wire frame; the slices are the batch's own,
// so it is valid until the batch changes.
func (b *batch) frame() wire.NVML {
	return wire.NVML{Type: wire.TypeNVML, Dev: b.dev, T0: b.t0, DT: b.dt, Used: b.used, Reserved: b.resv}
}

// frame is the batch as its wire frame, leaving out optional counters that
// were 0 in every sample; the slices are the batch's own, so it is valid
// until the batch changes.
func (b *sampleBatch) frame() wire.Samples {
	f := wire.Samples{Type: wire.TypeSamples, PID: b.pid, Dev: b.dev, T0: b.t0, DT: b.dt}
	for i, l := range f.Lists() {
		if i < 3 || !allZero(b.vals[i]) {
			*l = b.vals[i]
		}
	}
	return f
}

func allZero(xs []int64) bool {
	for _, x := range xs {
		if x != 0 {
			return false
		}
	}
	return true
}
