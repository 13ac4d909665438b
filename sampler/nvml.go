package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/sampler/native"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// ErrNoDriver means NVML could not be used at all on this machine: the
// library is missing or the driver is not loaded. Init wraps it.
var ErrNoDriver = errors.New("no NVIDIA driver: NVML (libnvidia-ml.so.1) could not be loaded or the driver is not running; " +
	"to look around without a GPU run `gputop --demo`, or open a recording with `gputop --replay FILE`")

// Defaults for NVMLOptions.
const (
	DefaultRate     = 1000.0 // device samples per second per GPU
	DefaultProcRate = 10.0   // process-list refreshes per second
)

const (
	// maxLagTicks bounds catching up after a stall (GC, a slow NVML call,
	// a descheduled process): beyond this many periods behind, the pacer
	// starts afresh instead of sampling back to back to make up the count.
	maxLagTicks = 5
	// retryEvery is how often a failing device is tried again. A lost GPU
	// can make each call slow; retrying it at the full rate would steal
	// time from the healthy ones.
	retryEvery = 100 * time.Millisecond
	// rateWindow is how often the achieved rate is measured and reported.
	rateWindow = time.Second
	// maxRate keeps a bad --rate from turning the pacer into a busy loop.
	maxRate = 1e6
	// drainEvery is how often readings are moved from the native thread's
	// rings into the store: about a frame, and the rings hold seconds.
	drainEvery = 40 * time.Millisecond
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE ((unsigned long long)-1), what
// UsedGpuMemory holds when the driver cannot tell (e.g. without privileges).
const notAvailable = math.MaxUint64

// NVMLOptions configure the NVML source.
type NVMLOptions struct {
	Rate     float64 // device samples per second per GPU (default 1000)
	ProcRate float64 // process-list refreshes per second (default 10; negative turns them off)
	// Thread samples device memory from a native thread (package native)
	// that calls the loaded libnvidia-ml.so.1 directly, instead of from a
	// goroutine through the Interface. It needs the real library; where the
	// thread cannot be had, a goroutine samples and the log says why.
	Thread bool

	funcs *native.Funcs // tests: C stand-ins instead of the library's functions
}

func (o NVMLOptions) withDefaults() NVMLOptions {
	if !(o.Rate > 0) { // also NaN
		o.Rate = DefaultRate
	}
	o.Rate = math.Min(o.Rate, maxRate)
	if o.ProcRate == 0 || math.IsNaN(o.ProcRate) {
		o.ProcRate = DefaultProcRate
	}
	o.ProcRate = math.Min(o.ProcRate, maxRate)
	return o
}

// Error is a non-SUCCESS nvml.Return from one NVML call.
// errors.Is(err, nvml.ERROR_GPU_IS_LOST) works on it.
type Error struct {
	Op  string // the NVML call, e.g. "GetMemoryInfo_v2"
	Ret nvml.Return
}

func (e *Error) Error() string { return "nvml " + e.Op + ": " + describe(e.Ret) }

// Unwrap gives the nvml.Return, which is itself an error.
func (e *Error) Unwrap() error { return e.Ret }

// check turns a Return into an error at the call site; it allocates only
// on failure, which keeps the sampling path free of allocations.
func check(op string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &Error{Op: op, Ret: r}
}

// describe is a short human text for a Return, followed by NVML's own
// string for it (the constant's name without a driver, the driver's
// sentence with one).
func describe(r nvml.Return) string {
	var human string
	switch r {
	case nvml.ERROR_GPU_IS_LOST:
		human = "GPU is lost"
	case nvml.ERROR_NOT_SUPPORTED:
		human = "not supported"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		human = "not supported by this driver"
	case nvml.ERROR_NO_PERMISSION:
		human = "no permission"
	case nvml.ERROR_RESET_REQUIRED:
		human = "GPU needs a reset"
	case nvml.ERROR_TIMEOUT:
		human = "timed out"
	case nvml.ERROR_UNKNOWN:
		human = "unknown NVML error"
	case nvml.ERROR_UNINITIALIZED:
		human = "NVML not initialised"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		human = "NVIDIA driver not loaded"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		human = "libnvidia-ml.so.1 not found"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		human = "NVIDIA kernel module and NVML library versions differ"
	case nvml.ERROR_INSUFFICIENT_POWER:
		human = "insufficient power"
	case nvml.ERROR_CORRUPTED_INFOROM:
		human = "corrupted infoROM"
	}
	s := r.Error()
	if human == "" || human == s {
		return s
	}
	return human + " (" + s + ")"
}

// noData reports whether a Return means "this device cannot tell" rather
// than a failure.
func noData(err error) bool {
	return errors.Is(err, nvml.ERROR_NOT_SUPPORTED) || errors.Is(err, nvml.ERROR_FUNCTION_NOT_FOUND)
}

// NVML samples every GPU's memory through NVML into a store.
type NVML struct {
	lib    nvml.Interface
	st     *store.Store
	opt    NVMLOptions
	devs   []*nvmlDev
	names  *procNames
	inited bool
}

// nvmlDev is the sampler's state for one GPU. The sampling goroutine owns
// every field but procErr, which the process goroutine owns.
type nvmlDev struct {
	index int
	h     nvml.Device // nil when no handle could be had; then it is not sampled
	v1    bool        // GetMemoryInfo_v2 unsupported: use GetMemoryInfo (reserved unknown, 0)

	errRet  nvml.Return // error currently shown on the device; SUCCESS when healthy
	errOp   string
	retryAt time.Time // while failing, when to try again

	count    uint64 // successful samples
	reported uint64 // count at the last rate report

	procErr nvml.Return // last process-list error logged; SUCCESS when none
}

// NewNVML returns an NVML source writing into st. Call Init, then Run, then Close.
func NewNVML(lib nvml.Interface, st *store.Store, opt NVMLOptions) *NVML {
	return &NVML{lib: lib, st: st, opt: opt.withDefaults(), names: newProcNames("/proc")}
}

// Options returns the options in effect, defaults filled in.
func (n *NVML) Options() NVMLOptions { return n.opt }

// DeviceCount is the number of GPUs NVML reported at Init.
func (n *NVML) DeviceCount() int { return len(n.devs) }

// Init initialises NVML and registers every GPU in the store. A device that
// cannot be read is registered with its error shown and is not sampled;
// the others still are. Without a driver the error wraps ErrNoDriver.
func (n *NVML) Init() error {
	if n.inited {
		return nil
	}
	if r := n.lib.Init(); r != nvml.SUCCESS {
		if r == nvml.ERROR_LIBRARY_NOT_FOUND || r == nvml.ERROR_DRIVER_NOT_LOADED {
			return fmt.Errorf("%w [%s]", ErrNoDriver, r.Error())
		}
		return fmt.Errorf("cannot start NVML: %w", check("Init", r))
	}
	count, r := n.lib.DeviceGetCount()
	if err := check("DeviceGetCount", r); err != nil {
		n.lib.Shutdown()
		return fmt.Errorf("cannot list GPUs: %w", err)
	}
	// Calling a symbol an old driver lacks would kill the process, so ask
	// the library first (drivers before R510 have no GetMemoryInfo_v2).
	v2 := hasSymbol(n.lib, "nvmlDeviceGetMemoryInfo_v2")
	n.devs = make([]*nvmlDev, 0, count)
	for i := 0; i < count; i++ {
		n.devs = append(n.devs, n.initDevice(i, !v2))
	}
	n.inited = true
	return nil
}

// hasSymbol asks the loaded library whether it exports name. Where it
// cannot tell (an interface without the extension), it assumes yes.
func hasSymbol(lib nvml.Interface, name string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true
		}
	}()
	ext := lib.Extensions()
	if ext == nil {
		return true
	}
	return ext.LookupSymbol(name) == nil
}

func (n *NVML) initDevice(i int, v1 bool) *nvmlDev {
	d := &nvmlDev{index: i, v1: v1}
	info := store.Device{Index: i, Name: fmt.Sprintf("GPU %d", i), Source: "nvml"}
	t := time.Now().UnixNano()
	h, r := n.lib.DeviceGetHandleByIndex(i)
	if err := check("DeviceGetHandleByIndex", r); err != nil {
		n.st.SetDevice(info)
		n.st.SetDeviceError(i, t, describe(r))
		return d
	}
	d.h = h
	// Without a name or UUID the device is still worth sampling; the agent
	// link (which maps by UUID) is what loses out, so say so in the log.
	name, r := h.GetName()
	if err := check("GetName", r); err != nil {
		n.st.Log(fmt.Sprintf("GPU %d: %v", i, err))
	} else if name != "" {
		info.Name = name
	}
	uuid, r := h.GetUUID()
	if err := check("GetUUID", r); err != nil {
		n.st.Log(fmt.Sprintf("GPU %d: %v", i, err))
	} else {
		info.UUID = uuid
	}
	_, _, total, err := d.read()
	info.Total = total
	n.st.SetDevice(info)
	if err != nil {
		d.fail(n.st, t, err, time.Now())
	}
	return d
}

// read returns the device's memory figures, falling back to GetMemoryInfo
// for good once the device says it lacks GetMemoryInfo_v2.
func (d *nvmlDev) read() (used, reserved, total uint64, err error) {
	if !d.v1 {
		m, r := d.h.GetMemoryInfo_v2()
		err = check("GetMemoryInfo_v2", r)
		if err == nil {
			return m.Used, m.Reserved, m.Total, nil
		}
		if !noData(err) {
			return 0, 0, 0, err
		}
		d.v1 = true
	}
	m, r := d.h.GetMemoryInfo()
	if err = check("GetMemoryInfo", r); err != nil {
		return 0, 0, 0, err
	}
	return m.Used, 0, m.Total, nil
}

// fail shows err on the device (once per distinct error) and schedules a retry.
func (d *nvmlDev) fail(st *store.Store, t int64, err error, now time.Time) {
	d.retryAt = now.Add(retryEvery)
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Op: "?", Ret: nvml.ERROR_UNKNOWN}
	}
	if e.Ret == d.errRet && e.Op == d.errOp {
		return
	}
	d.errRet, d.errOp = e.Ret, e.Op
	st.SetDeviceError(d.index, t, describe(e.Ret))
}

// recovered clears the device's error after a successful read.
func (d *nvmlDev) recovered(st *store.Store, t int64) {
	d.errRet, d.errOp = nvml.SUCCESS, ""
	st.SetDeviceError(d.index, t, "")
}

// tick samples every device once. It is the 1 kHz path and adds no
// allocation of its own while devices are healthy (go-nvml's cgo wrapper
// still heap-allocates each 40-byte result; measured on an H200).
func (n *NVML) tick(now time.Time) {
	for _, d := range n.devs {
		if d.h == nil || (d.errRet != nvml.SUCCESS && now.Before(d.retryAt)) {
			continue
		}
		used, reserved, _, err := d.read()
		n.record(d, time.Now().UnixNano(), used, reserved, err, now)
	}
}

// record stores one reading of d taken at t, or shows its error; both
// samplers (tick here, take for the native thread) end in it.
func (n *NVML) record(d *nvmlDev, t int64, used, reserved uint64, err error, now time.Time) {
	if err != nil {
		d.fail(n.st, t, err, now)
		return
	}
	if d.errRet != nvml.SUCCESS {
		d.recovered(n.st, t)
	}
	n.st.AddNVML(d.index, t, used, reserved)
	d.count++
}

// reportRates stores each device's achieved rate over the last window.
func (n *NVML) reportRates(elapsed time.Duration) {
	for _, d := range n.devs {
		hz := float64(d.count-d.reported) / elapsed.Seconds()
		d.reported = d.count
		n.st.SetRate(d.index, hz)
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
// by the calling goroutine: every device in one wake-up per tick. Process
// lists are refreshed by a second goroutine, because those queries cost
// far more than a memory read (they allocate, may call NVML several times,
// and read /proc for new pids) and would otherwise delay device ticks.
// A panic in either (which real NVML never causes) ends Run with an error
// instead of the program.
func (n *NVML) Run(ctx context.Context) error {
	if !n.inited {
		return errors.New("nvml sampler: Run called before a successful Init")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		procErr error
	)
	if n.opt.ProcRate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if procErr = guard("process list", func() { n.procLoop(ctx) }); procErr != nil {
				cancel()
			}
		}()
	}
	err := guard("device sampling", func() {
		if n.opt.Thread {
			if loop := n.startThread(); loop != nil {
				n.drainLoop(ctx, loop)
				return
			}
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
			n.st.Log("sampling from Go instead of a native thread: " + err.Error())
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
		if d.h == nil {
			continue
		}
		h, r := f.Handle(d.index)
		if r != 0 || h == 0 {
			n.st.Log(fmt.Sprintf("sampling from Go instead of a native thread: GPU %d: %s", d.index, describe(nvml.Return(r))))
			return nil
		}
		cfg.Handles[i], cfg.V1[i] = h, d.v1
	}
	loop, err := native.Start(cfg)
	if err != nil {
		n.st.Log("sampling from Go instead of a native thread: " + err.Error())
		return nil
	}
	return loop
}

// drainLoop moves the native thread's readings into the store until ctx is
// done, then stops the thread.
func (n *NVML) drainLoop(ctx context.Context, loop *native.Loop) {
	defer loop.Stop()
	tk := time.NewTicker(drainEvery)
	defer tk.Stop()
	rates := n.startRates(time.Now())
	var dropped uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		for _, d := range n.devs {
			if d.h != nil {
				loop.Drain(d.index, func(s native.Sample) { n.take(d, s, now) })
			}
		}
		rates.due(now)
		if k := loop.Dropped(); k != dropped {
			n.st.Log(fmt.Sprintf("NVML sampling: %d readings dropped (the store fell behind)", k-dropped))
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

func (n *NVML) procLoop(ctx context.Context) {
	every := max(time.Duration(float64(time.Second)/n.opt.ProcRate), time.Millisecond)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		n.refreshProcs()
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// refreshProcs queries every device's processes once and stores them.
// NOT_SUPPORTED means the device has no process data: nothing is stored.
// Other errors are logged once per change; the device's error line is left
// to the memory sampler, which sees the same failures.
func (n *NVML) refreshProcs() {
	n.names.begin()
	defer n.names.sweep()
	for _, d := range n.devs {
		if d.h == nil {
			continue
		}
		procs, ok, err := queryProcs(d.h)
		t := time.Now().UnixNano()
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Ret != d.procErr {
				d.procErr = e.Ret
				n.st.Log(fmt.Sprintf("GPU %d: process list: %s", d.index, describe(e.Ret)))
			}
			continue
		}
		if d.procErr != nvml.SUCCESS {
			d.procErr = nvml.SUCCESS
			n.st.Log(fmt.Sprintf("GPU %d: process list readable again", d.index))
		}
		if !ok {
			continue
		}
		for i := range procs {
			procs[i].Name = n.names.lookup(procs[i].PID)
		}
		n.st.SetProcs(d.index, t, procs)
	}
}

// procUse is one pid's memory while merging; known is false when NVML
// reported only "not available".
type procUse struct {
	used  uint64
	known bool
}

// queryProcs returns the compute and graphics processes of a device merged
// by pid. ok is false when the device supports neither query.
func queryProcs(h nvml.Device) (procs []wire.Proc, ok bool, err error) {
	compute, r := h.GetComputeRunningProcesses()
	errC := check("GetComputeRunningProcesses", r)
	graphics, r := h.GetGraphicsRunningProcesses()
	errG := check("GetGraphicsRunningProcesses", r)
	for _, e := range []error{errC, errG} {
		if e != nil && !noData(e) {
			return nil, false, e
		}
	}
	if errC != nil && errG != nil {
		return nil, false, nil
	}
	return mergeProcs(compute, graphics), true, nil
}

// mergeProcs merges process lists by pid. One list can name a pid more than
// once (one entry per MIG instance): those are separate memory and add up.
// A pid in both lists is one context seen twice: the larger figure wins.
// "Not available" is unknown, never a number; it gives way to a known one.
// The result is sorted by memory used, largest first, unknown last.
func mergeProcs(lists ...[]nvml.ProcessInfo) []wire.Proc {
	merged := map[int]procUse{}
	for _, list := range lists {
		this := map[int]procUse{}
		for _, p := range list {
			u := this[int(p.Pid)]
			if p.UsedGpuMemory != notAvailable {
				u.used += p.UsedGpuMemory
				u.known = true
			}
			this[int(p.Pid)] = u
		}
		for pid, u := range this {
			m, seen := merged[pid]
			if !seen || (u.known && (!m.known || u.used > m.used)) {
				merged[pid] = u
			}
		}
	}
	out := make([]wire.Proc, 0, len(merged))
	for pid, u := range merged {
		out = append(out, wire.Proc{PID: pid, Used: u.used, UsedUnknown: !u.known})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.UsedUnknown != b.UsedUnknown {
			return !a.UsedUnknown
		}
		if a.Used != b.Used {
			return a.Used > b.Used
		}
		return a.PID < b.PID
	})
	return out
}

// Close shuts NVML down. Call it after Run has returned.
func (n *NVML) Close() error {
	if !n.inited {
		return nil
	}
	n.inited = false
	return check("Shutdown", n.lib.Shutdown())
}
