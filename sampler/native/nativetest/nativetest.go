// Package nativetest provides C stand-ins for NVML's memory functions so
// that package native's thread, ring and fallbacks run for real in tests on
// machines without an NVIDIA driver. Only tests import it.
package nativetest

/*
#include "fake.h"
*/
import "C"

import "github.com/gputop/gputop/sampler/native"

// GPUs is how many fake GPUs there are (handles 1..GPUs).
const GPUs = C.FAKE_GPUS

// Funcs returns the stand-ins' addresses.
func Funcs() native.Funcs {
	return native.Funcs{GetV2: uintptr(C.fake_get_v2()), GetV1: uintptr(C.fake_get_v1()), ByIndex: uintptr(C.fake_by_index())}
}

// FailingHandles is Funcs whose handle lookup always fails (NVML_ERROR_UNKNOWN).
func FailingHandles() native.Funcs {
	f := Funcs()
	f.ByIndex = uintptr(C.fake_by_index_failing())
	return f
}

// Set sets what GPU dev reports: its figures and the nvmlReturn_t of the v2
// and v1 queries (0: success).
func Set(dev int, used, reserved uint64, retV2, retV1 int) {
	C.fake_set(C.int(dev), C.uint64_t(used), C.uint64_t(reserved), C.int(retV2), C.int(retV1))
}

// Calls counts the v2 (v1 false) or v1 queries made on GPU dev.
func Calls(dev int, v1 bool) uint64 {
	b := C.int(0)
	if v1 {
		b = 1
	}
	return uint64(C.fake_calls(C.int(dev), b))
}
