// NVML's errors in words: which call failed on which device, what a
// missing driver or an unsupported query means.

package sampler

import (
	"errors"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver means NVML could not be used at all on this machine: the
// library is missing or the driver is not loaded. Init wraps it.
var ErrNoDriver = errors.New("no NVIDIA driver: NVML (libnvidia-ml.so.1) could not be loaded or the driver is not running; " +
	"to look around without a GPU run `gputop --demo`, or open a recording with `gputop --replay FILE`")

// notAvailable is NVML_VALUE_NOT_AVAILABLE ((unsigned long long)-1), what
// UsedGpuMemory holds when the driver cannot tell (e.g. without privileges).
const notAvailable = math.MaxUint64

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
