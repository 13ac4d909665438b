// The sampling loop: device memory read by the native thread (or a Go
// ticker in tests), drained, paced, and the achieved rates reported.

package sampler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/sampler/native"
)

// tick samples every device once. It is the 1 kHz path and adds no
// allocation of its own while devices are healthy (go-nvml's cgo wrapper
// still heap-allocates each 40-byte result; measured on an H200).
func (n *NVML) tick(now time.Time) {
	for _, d := range n.devs {
		if d.h == nil || (d.errRet != nvml.SUCCESS && now.Before(d.retryAt)) {
			continue
		}
		if d.unified {
			n.readSystem(d, now)
			continue
		}
		used, reserved, _, err := d.read()
		n.record(d, time.Now().UnixNano(), used, reserved, err, now)
	}
}

// readSystem stores a unified-memory device's reading of the system's
// memory, at most every systemEvery (both sampling loops call it).
func (n *NVML) readSystem(d *nvmlDev, now time.Time) {
	if now.Before(d.nextRead) || (d.errRet != nvml.SUCCESS && now.Before(d.retryAt)) {
		return
	}
	d.nextRead = now.Add(systemEvery)
	used, _, _, err := d.read()
	n.record(d, time.Now().UnixNano(), used, 0, err, now)
}

// record stores one reading of d taken at t, or shows its error; both
// samplers (tick here, take for the native thread) end in it.
func (n *NVML) record(d *nvmlDev, t int64, used, reserved uint64, err error, now time.Time) {
	if err != nil {
		d.fail(n.in, t, err, now)
		return
	}
	if d.errRet != nvml.SUCCESS {
		d.recovered(n.in, t)
	}
	n.in.NVML(d.index, t, used, reserved)
	d.used.Store(used)
	d.count++
}

// reportRates stores each device's achieved rate over the last window.
func (n *NVML) reportRates(elapsed time.Duration) {
	for _, d := range n.devs {
		hz := float64(d.count-d.reported) / elapsed.Seconds()
		d.reported = d.count
		n.in.Rate(d.index, hz)
	}
}

// rateReporter reports the achieved rates once per rateWindow; both sampling
// loops call due at each of their wake-ups.
type rateReporter struct {
	n    *NVML
	last time.Time
}

// startRates opens a rate window at now, also when Run is called again.
func (n *NVML) startRates(now time.Time) rateReporter {
	for _, d := range n.devs {
		d.reported = d.count
	}
	return rateReporter{n: n, last: now}
}

func (r *rateReporter) due(now time.Time) {
	if el := now.Sub(r.last); el >= rateWindow {
		r.n.reportRates(el)
		r.last = now
	}
}

// pacer keeps a fixed rate with absolute deadlines: each deadline is the
// previous one plus a period, so a late wake-up shortens the next sleep
// instead of slowing the rate. After a long stall it resyncs rather than
// firing a burst of back-to-back samples.
type pacer struct {
	period time.Duration
	next   time.Time
}

func newPacer(period time.Duration, start time.Time) *pacer {
	return &pacer{period: period, next: start}
}

// wait advances to the next deadline and returns how long to sleep until
// it (<= 0: sample now).
func (p *pacer) wait(now time.Time) time.Duration {
	p.next = p.next.Add(p.period)
	if now.Sub(p.next) > maxLagTicks*p.period {
		p.next = now
	}
	return p.next.Sub(now)
}

func (o NVMLOptions) period() time.Duration {
	return max(time.Duration(float64(time.Second)/o.Rate), time.Nanosecond)
}

// Run samples until ctx is done, then returns nil. Device memory is sampled
// by the calling goroutine: every device in one wake-up per tick, or, with
// the native thread, moved from its ring every DrainEvery. Process lists
// are refreshed on the drain's ticks when they come no more often than
// those (the default 10 a second): one wake-up for both, the drain being
// no hurry. Otherwise by a second goroutine, because those queries cost
// far more than a memory read (they allocate, may call NVML several times,
// and read /proc for new pids) and would delay device ticks.
// A panic in either (which real NVML never causes) ends Run with an error
// instead of the program.
func (n *NVML) Run(ctx context.Context) error {
	if !n.inited {
		return errors.New("nvml sampler: Run called before a successful Init")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loop *native.Loop
	if n.opt.Thread {
		if err := guard("device sampling", func() { loop = n.startThread() }); err != nil {
			return err
		}
	}
	procs := n.opt.ProcRate > 0
	if loop != nil && procs && n.procEvery() >= DrainEvery {
		var procErr error
		err := guard("device sampling", func() { procErr = n.drainLoop(ctx, loop, true) })
		return errors.Join(err, procErr)
	}
	var (
		wg      sync.WaitGroup
		procErr error
	)
	if procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if procErr = guard("process list", func() { n.procLoop(ctx) }); procErr != nil {
				cancel()
			}
		}()
	}
	err := guard("device sampling", func() {
		if loop != nil {
			n.drainLoop(ctx, loop, false)
			return
		}
		n.sampleLoop(ctx)
	})
	cancel()
	wg.Wait()
	return errors.Join(err, procErr)
}

func guard(what string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("nvml %s stopped: %v", what, r)
		}
	}()
	f()
	return nil
}

func (n *NVML) sampleLoop(ctx context.Context) {
	done := ctx.Done()
	if len(n.devs) == 0 {
		<-done
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	p := newPacer(n.opt.period(), start)
	rates := n.startRates(start)
	for {
		now := time.Now()
		n.tick(now)
		rates.due(now)
		if d := p.wait(time.Now()); d > 0 {
			timer.Reset(d)
			select {
			case <-done:
				return
			case <-timer.C:
			}
		} else {
			select {
			case <-done:
				return
			default:
			}
		}
	}
}

// startThread starts the native sampling thread, or logs why it cannot and
// returns nil.
func (n *NVML) startThread() *native.Loop {
	var f native.Funcs
	if n.opt.funcs != nil {
		f = *n.opt.funcs
	} else {
		var err error
		if f, err = native.Lookup(); err != nil {
			n.log("sampling from Go instead of a native thread: " + err.Error())
			return nil
		}
	}
	cfg := native.Config{
		Funcs:   f,
		Handles: make([]uintptr, len(n.devs)),
		V1:      make([]bool, len(n.devs)),
		Period:  n.opt.period(),
		Retry:   retryEvery,
	}
	for i, d := range n.devs {
		if d.h == nil || d.unified { // a unified-memory device is read from Go
			continue
		}
		h, r := f.Handle(d.index)
		if r != 0 || h == 0 {
			n.log(fmt.Sprintf("sampling from Go instead of a native thread: GPU %d: %s", d.index, describe(nvml.Return(r))))
			return nil
		}
		cfg.Handles[i], cfg.V1[i] = h, d.v1
	}
	loop, err := native.Start(cfg)
	if err != nil {
		n.log("sampling from Go instead of a native thread: " + err.Error())
		return nil
	}
	return loop
}

// drainLoop moves the native thread's readings into the store until ctx is
// done, then stops the thread; with procs, it refreshes the process lists
// too, on the ticks where procsDue says so, and returns the error of a
// refresh that panicked.
func (n *NVML) drainLoop(ctx context.Context, loop *native.Loop, procs bool) error {
	defer loop.Stop()
	tk := time.NewTicker(DrainEvery)
	defer tk.Stop()
	rates := n.startRates(time.Now())
	var dropped uint64
	for {
		// right after the last drain (or at the start, with no lists yet)
		if procs && n.procsDue(time.Now(), DrainEvery/2) {
			if err := guard("process list", n.refreshProcs); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
		now := time.Now()
		for _, d := range n.devs {
			switch {
			case d.h != nil && d.unified:
				n.readSystem(d, now)
			case d.h != nil:
				loop.Drain(d.index, func(s native.Sample) { n.take(d, s, now) })
			}
		}
		rates.due(now)
		if k := loop.Dropped(); k != dropped {
			n.log(fmt.Sprintf("NVML sampling: %d readings dropped (the store fell behind)", k-dropped))
			dropped = k
		}
	}
}

// take stores one reading of the native thread.
func (n *NVML) take(d *nvmlDev, s native.Sample, now time.Time) {
	var err error
	if s.V1 {
		d.v1 = true
		err = check("GetMemoryInfo", nvml.Return(s.Ret))
	} else {
		err = check("GetMemoryInfo_v2", nvml.Return(s.Ret))
	}
	n.record(d, s.T, s.Used, s.Reserved, err, now)
}
