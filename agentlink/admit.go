package agentlink

import (
	"fmt"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// admit refuses a frame that gputop could keep live but not record so that
// the recording loads again: a time further than wire.MaxClockSkew from
// gputop's clock (a recording holds times near its start only), or a frame
// whose canonical encoding, the form the recorder writes, is longer than
// wire.MaxFrameBytes. The line itself is within that limit; decoding and
// encoding again can still make it longer (`{}` for a holders group comes
// back with all its fields), and recording.MaxLineBytes is set from this
// bound. Samples and byes are small and fixed in form, so only their time
// is checked. A hello must be one a training process can send (checkHello).
func admit(f any, now time.Time) error {
	if h, ok := f.(wire.Hello); ok {
		if err := checkHello(h); err != nil {
			return err
		}
	}
	if t, ok := frameTime(f); ok {
		if d := time.Duration(t - now.UnixNano()); d > wire.MaxClockSkew || d < -wire.MaxClockSkew {
			return fmt.Errorf("%s: \"t\" %d (%s) is more than %v from gputop's clock (%s)",
				frameType(f), t, time.Unix(0, t).UTC().Format(time.RFC3339), wire.MaxClockSkew,
				now.UTC().Format(time.RFC3339))
		}
	}
	switch f.(type) {
	case wire.Hello, wire.Mark, wire.OOM, wire.Holders, wire.LayoutReading, wire.FrameworkReading, wire.Snap:
		b, err := encodeLine(f)
		if err != nil {
			return fmt.Errorf("%s: %v", frameType(f), err)
		}
		if n := len(b) - 1; n > wire.MaxFrameBytes {
			return fmt.Errorf("%s: %d bytes once decoded and encoded again (as gputop records it), over the %d-byte limit",
				frameType(f), n, wire.MaxFrameBytes)
		}
	}
	return nil
}

// frameTime is the time a frame from an agent carries.
func frameTime(f any) (int64, bool) {
	switch f := f.(type) {
	case wire.Hello:
		return f.T, true
	case wire.Sample:
		return f.T, true
	case wire.Mark:
		return f.T, true
	case wire.OOM:
		return f.T, true
	case wire.Holders:
		return f.T, true
	case wire.LayoutReading:
		return f.T, true
	case wire.FrameworkReading:
		return f.T, true
	case wire.Bye:
		return f.T, true
	}
	return 0, false
}

// What one process's hello may list: more devices than any machine gives a
// process, or a UUID longer than NVML's, is no training process's, and
// the store keeps a hello per agent.
const (
	MaxHelloDevices = 64
	maxUUIDBytes    = 96 // NVML_DEVICE_UUID_V2_BUFFER_SIZE, its NUL included
)

// checkHello refuses a hello no training process sends: a pid above Linux's
// (those are the keys of remote hosts' processes, store.HostPID), more
// than MaxHelloDevices devices, a UUID longer than NVML's.
func checkHello(h wire.Hello) error {
	if h.PID >= 1<<store.PIDBits {
		return fmt.Errorf(`hello: "pid" %d is not a Linux process id (at most %d)`, h.PID, 1<<store.PIDBits-1)
	}
	if len(h.Devices) > MaxHelloDevices {
		return fmt.Errorf(`hello: %d "devices"; gputop takes at most %d from one process`, len(h.Devices), MaxHelloDevices)
	}
	for i, d := range h.Devices {
		if len(d.UUID) >= maxUUIDBytes {
			return fmt.Errorf(`hello: devices[%d]: "uuid" is %d bytes long; NVML's are shorter than %d`, i, len(d.UUID), maxUUIDBytes)
		}
	}
	return nil
}
