// Package native samples GPU memory from a POSIX thread that calls NVML
// directly, so that sampling at 1 kHz does not wake the Go scheduler 1000
// times a second: on an H200 a Go loop doing the same NVML call cost 5.1% of
// a core, this thread 2.1% (bench/probe/run.sh). Go drains the readings a
// few dozen times a second.
//
// The NVML functions come from the libnvidia-ml.so.1 that go-nvml has
// already loaded; everything else (names, UUIDs, processes, errors) stays
// with go-nvml.
package native

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "loop.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// RingSize is how many readings per GPU wait for a drain before new ones
// are dropped (and counted).
const RingSize = C.GT_RING

// Funcs are the addresses of the NVML functions the loop calls.
type Funcs struct {
	GetV2   uintptr // nvmlDeviceGetMemoryInfo_v2; 0 on drivers before R510
	GetV1   uintptr // nvmlDeviceGetMemoryInfo
	ByIndex uintptr // nvmlDeviceGetHandleByIndex_v2
}

// Lookup finds the functions in the libnvidia-ml.so.1 loaded by go-nvml
// (call it after nvml.Init succeeded). It never loads the library itself.
func Lookup() (Funcs, error) {
	var f Funcs
	var v2, v1, bi C.uintptr_t
	msg := (*C.char)(C.malloc(256))
	defer C.free(unsafe.Pointer(msg))
	if C.gt_lookup(&v2, &v1, &bi, msg, 256) != 0 {
		return f, errors.New(C.GoString(msg))
	}
	return Funcs{GetV2: uintptr(v2), GetV1: uintptr(v1), ByIndex: uintptr(bi)}, nil
}

// Handle returns GPU index's nvmlDevice_t and the nvmlReturn_t of the call.
func (f Funcs) Handle(index int) (uintptr, int) {
	var h C.uintptr_t
	r := C.gt_handle(C.uintptr_t(f.ByIndex), C.uint(index), &h)
	return uintptr(h), int(r)
}

// Sample is one reading. Ret is the nvmlReturn_t of the call; Used and
// Reserved hold only when it is 0. V1 says the v1 query was used, which
// has no reserved figure.
type Sample struct {
	T        int64 // Unix ns, taken just after the call returned
	Used     uint64
	Reserved uint64
	Ret      int32
	V1       bool
}

// Config describes a loop. Handles[i] is GPU i's handle (0: not sampled);
// V1[i] starts GPU i on the v1 query.
type Config struct {
	Funcs   Funcs
	Handles []uintptr
	V1      []bool
	Period  time.Duration // between ticks; every GPU is read once per tick
	Retry   time.Duration // a failing GPU is read again after this, not every tick
}

// Loop is a running sampling thread.
type Loop struct {
	mu  sync.Mutex
	l   *C.gt_loop
	n   int
	buf []C.gt_sample
}

// Start starts the thread.
func Start(c Config) (*Loop, error) {
	n := len(c.Handles)
	if len(c.V1) != n {
		return nil, fmt.Errorf("native: %d handles but %d v1 flags", n, len(c.V1))
	}
	if c.Funcs.GetV1 == 0 && c.Funcs.GetV2 == 0 {
		return nil, errors.New("native: no NVML memory function")
	}
	// C memory: the thread keeps reading these after Start returns
	handles := (*C.uintptr_t)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	v1 := (*C.int)(C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(handles))
	defer C.free(unsafe.Pointer(v1))
	hs := unsafe.Slice(handles, max(n, 1))
	vs := unsafe.Slice(v1, max(n, 1))
	for i := range n {
		hs[i] = C.uintptr_t(c.Handles[i])
		if c.V1[i] {
			vs[i] = 1
		}
	}
	var errno C.int
	l := C.gt_start(C.int(n), handles, v1, C.uintptr_t(c.Funcs.GetV2), C.uintptr_t(c.Funcs.GetV1),
		C.int64_t(c.Period.Nanoseconds()), C.int64_t(c.Retry.Nanoseconds()), &errno)
	if l == nil {
		return nil, fmt.Errorf("native: cannot start the sampling thread: %w", syscall.Errno(errno))
	}
	return &Loop{l: l, n: n, buf: make([]C.gt_sample, 512)}, nil
}

// Drain calls f with each waiting reading of GPU dev, oldest first. It is
// safe to call from one goroutine at a time; calls after Stop do nothing.
func (l *Loop) Drain(dev int, f func(Sample)) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for l.l != nil {
		k := int(C.gt_drain(l.l, C.int(dev), &l.buf[0], C.int(len(l.buf))))
		for _, s := range l.buf[:k] {
			f(Sample{T: int64(s.t), Used: uint64(s.used), Reserved: uint64(s.reserved), Ret: int32(s.ret), V1: s.v1 != 0})
		}
		total += k
		if k < len(l.buf) {
			break
		}
	}
	return total
}

// Dropped counts readings lost to a full ring since Start.
func (l *Loop) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.l == nil {
		return 0
	}
	return uint64(C.gt_dropped(l.l))
}

// Stop ends the thread and waits for it. Readings not drained are lost.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.l != nil {
		C.gt_stop(l.l)
		l.l = nil
	}
}
