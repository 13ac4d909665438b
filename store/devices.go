// The GPUs: NVML's, and those only an agent sees.

package store

// Device is what the store knows about one GPU.
type Device struct {
	Index  int
	UUID   string
	Name   string
	Total  uint64
	Source string  // "nvml" or "agent" (known only through an agent)
	Host   string  // the remote host it is on ("" for this machine)
	Memory string  // what Total and NVML used measure: "" the GPU's own memory, wire.MemorySystem the system's (unified memory)
	Rate   float64 // achieved NVML samples per second
	Err    string  // last NVML error on this device; "" when healthy
	ErrAt  int64
}

// MaxDevices bounds device indices, so a corrupt recording cannot make the
// store allocate a device table of any size.
const MaxDevices = 1024

// SetDevice adds or updates a device (by Index) and returns it as kept; an
// index outside [0, MaxDevices) is ignored (false).
func (s *Store) SetDevice(d Device) (Device, bool) {
	if d.Index < 0 || d.Index >= MaxDevices {
		return Device{}, false
	}
	d.Name, d.Err, d.Host = CleanText(d.Name), CleanText(d.Err), CleanText(d.Host)
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.devices) <= d.Index {
		s.devices = append(s.devices, Device{Index: len(s.devices)})
	}
	old := s.devices[d.Index]
	if d.Rate == 0 {
		d.Rate = old.Rate
	}
	s.devices[d.Index] = d
	s.gen++
	return d, true
}

// SetRate records a device's achieved NVML sample rate.
func (s *Store) SetRate(dev int, hz float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if dev >= 0 && dev < len(s.devices) {
		s.devices[dev].Rate = hz
		s.gen++
	}
}

// SetDeviceError records (err != "") or clears (err == "") an NVML error.
// It returns the error as kept and whether it changed the device's state
// (an error repeated, or a device not known, changes nothing).
func (s *Store) SetDeviceError(dev int, t int64, err string) (string, bool) {
	err = CleanText(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if dev < 0 || dev >= len(s.devices) || s.devices[dev].Err == err {
		return err, false
	}
	s.devices[dev].Err, s.devices[dev].ErrAt = err, t
	s.gen++
	return err, true
}

// DeviceByUUID returns the index of the device with this UUID, or -1.
func (s *Store) DeviceByUUID(uuid string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deviceByUUID(uuid)
}

func (s *Store) deviceByUUID(uuid string) int {
	for _, d := range s.devices {
		if uuid != "" && d.UUID == uuid {
			return d.Index
		}
	}
	return -1
}

// Devices returns a copy of the device list.
func (s *Store) Devices() []Device {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Device(nil), s.devices...)
}
