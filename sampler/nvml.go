package sampler

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/sampler/native"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

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
)

// DrainEvery is how often readings are moved from the native thread's
// rings into the store: ten times a second, as often as the recorder seals
// its batches and more than twice as often as the TUI looks (the rings hold
// 4 s). Each drain wakes the Go side, which costs whether or not anything
// changed: at 40 ms it woke 25 times a second for a screen read 4 times.
const DrainEvery = 100 * time.Millisecond

// NVMLOptions configure the NVML source.
type NVMLOptions struct {
	Rate     float64 // device samples per second per GPU (default 1000)
	ProcRate float64 // process-list refreshes per second at most (default 10; negative turns them off); see procsDue
	// Thread samples device memory from a native thread (package native)
	// that calls the loaded libnvidia-ml.so.1 directly, instead of from a
	// goroutine through the Interface. It needs the real library; where the
	// thread cannot be had, a goroutine samples and the log says why.
	Thread bool
	// Log receives the sampler's notes for the user (a device that cannot
	// be read, a fallback from the native thread); nil drops them.
	Log func(string)

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

// NVML samples every GPU's memory through NVML into a store.
type NVML struct {
	lib   nvml.Interface
	in    *ingest.Ingest
	opt   NVMLOptions
	devs  []*nvmlDev
	names *procNames
	// procsAt is when the process lists were last read (only the
	// goroutine that reads them touches it).
	procsAt time.Time
	inited  bool
	// meminfo is where a unified-memory device's figures are read
	// ("/proc/meminfo"; tests: a file of their own).
	meminfo string
}

// nvmlDev is the sampler's state for one GPU. The sampling goroutine owns
// every field but procErr, which the process goroutine owns.
type nvmlDev struct {
	index int
	h     nvml.Device // nil when no handle could be had; then it is not sampled
	v1    bool        // GetMemoryInfo_v2 unsupported: use GetMemoryInfo (reserved unknown, 0)
	// unified: NVML has no memory figures for it (a unified-memory GPU):
	// the system's are read from meminfo every systemEvery, never by the
	// native thread
	unified  bool
	meminfo  string
	nextRead time.Time

	errRet  nvml.Return // error currently shown on the device; SUCCESS when healthy
	errOp   string
	retryAt time.Time // while failing, when to try again

	count    uint64 // successful samples
	reported uint64 // count at the last rate report

	procErr nvml.Return // last process-list error logged; SUCCESS when none

	// used is the latest used figure read, for the process lists, which
	// may be refreshed from another goroutine; procsUsed is what it was
	// at the last refresh (only that goroutine touches it).
	used      atomic.Uint64
	procsUsed uint64
}

// log hands a note to Options.Log.
func (n *NVML) log(line string) {
	if n.opt.Log != nil {
		n.opt.Log(line)
	}
}

// NewNVML returns an NVML source writing through in. Call Init, then Run, then Close.
func NewNVML(lib nvml.Interface, in *ingest.Ingest, opt NVMLOptions) *NVML {
	return &NVML{lib: lib, in: in, opt: opt.withDefaults(), names: newProcNames("/proc"), meminfo: "/proc/meminfo"}
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
	d := &nvmlDev{index: i, v1: v1, meminfo: n.meminfo}
	info := store.Device{Index: i, Name: fmt.Sprintf("GPU %d", i), Source: "nvml"}
	t := time.Now().UnixNano()
	h, r := n.lib.DeviceGetHandleByIndex(i)
	if err := check("DeviceGetHandleByIndex", r); err != nil {
		n.in.Device(info)
		n.in.Apply(0, wire.DevError{T: t, Dev: i, Error: describe(r)})
		return d
	}
	d.h = h
	// Without a name or UUID the device is still worth sampling; the agent
	// link (which maps by UUID) is what loses out, so say so in the log.
	name, r := h.GetName()
	if err := check("GetName", r); err != nil {
		n.log(fmt.Sprintf("GPU %d: %v", i, err))
	} else if name != "" {
		info.Name = name
	}
	uuid, r := h.GetUUID()
	if err := check("GetUUID", r); err != nil {
		n.log(fmt.Sprintf("GPU %d: %v", i, err))
	} else {
		info.UUID = uuid
	}
	_, _, total, err := d.read()
	if unifiedMemory(total, err) {
		d.unified = true
		info.Memory = wire.MemorySystem
		n.log(fmt.Sprintf("GPU %d: NVML has no memory figures for it (unified memory): showing the system's memory (%s: MemTotal, MemTotal − MemAvailable used)", i, n.meminfo))
		_, _, total, err = d.read()
	}
	info.Total = total
	n.in.Device(info)
	if err != nil {
		d.fail(n.in, t, err, time.Now())
	}
	return d
}

// read returns the device's memory figures, falling back to GetMemoryInfo
// for good once the device says it lacks GetMemoryInfo_v2.
func (d *nvmlDev) read() (used, reserved, total uint64, err error) {
	if d.unified {
		used, total, err = systemMemory(d.meminfo)
		return used, 0, total, err
	}
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
func (d *nvmlDev) fail(in *ingest.Ingest, t int64, err error, now time.Time) {
	d.retryAt = now.Add(retryEvery)
	var e *Error
	msg := ""
	if errors.As(err, &e) {
		msg = describe(e.Ret)
	} else { // not NVML's: the system's memory unreadable
		e = &Error{Op: err.Error(), Ret: nvml.ERROR_UNKNOWN}
		msg = err.Error()
	}
	if e.Ret == d.errRet && e.Op == d.errOp {
		return
	}
	d.errRet, d.errOp = e.Ret, e.Op
	in.Apply(0, wire.DevError{T: t, Dev: d.index, Error: msg})
}

// recovered clears the device's error after a successful read.
func (d *nvmlDev) recovered(in *ingest.Ingest, t int64) {
	d.errRet, d.errOp = nvml.SUCCESS, ""
	in.Apply(0, wire.DevError{T: t, Dev: d.index})
}

// Close shuts NVML down. Call it after Run has returned.
func (n *NVML) Close() error {
	if !n.inited {
		return nil
	}
	n.inited = false
	return check("Shutdown", n.lib.Shutdown())
}
