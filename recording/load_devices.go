// Devices: NVML's lines, and the agent-only devices a hello brings back.

package recording

import (
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// flushDevices adds the held-back device frames as NVML devices.
func (l *loader) flushDevices() {
	for _, d := range l.devs {
		l.in.Device(store.Device{Index: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total, Source: "nvml", Host: d.Host, Memory: d.Memory})
	}
	l.devs = l.devs[:0]
}

// hello replays an agent's hello. A recording holds the devices a hello
// created for its agent (devices NVML does not see) right before the hello,
// so the held-back device frames are NVML devices followed by those. The
// split is the first one after which the rest is exactly what AgentHello is
// about to create; AgentHello then recreates them with their agent-only
// source. An NVML device that the hello lists identically can be taken for
// an agent device here; NVML data for it later puts that right (nvmlSeen).
func (l *loader) hello(h wire.Hello) {
	if len(l.devs) > 0 {
		have := l.st.Devices()
		k := len(l.devs)
		for split := 0; split < len(l.devs); split++ {
			if l.agentCreates(h, have, l.devs[:split], l.devs[split:]) {
				k = split
				break
			}
		}
		rest := append([]wire.Device(nil), l.devs[k:]...)
		l.devs = l.devs[:k]
		l.flushDevices()
		for _, d := range rest {
			if l.agentDevs == nil {
				l.agentDevs = map[int]bool{}
			}
			l.agentDevs[d.Index] = true
		}
	}
	l.in.Apply(h.PID, h)
}

// agentCreates reports whether AgentHello(h), after the NVML devices have
// and nvml, would create exactly the devices rest.
func (l *loader) agentCreates(h wire.Hello, have []store.Device, nvml, rest []wire.Device) bool {
	known := map[string]bool{}
	next := len(have)
	for _, d := range have {
		known[d.UUID] = true
	}
	for _, d := range nvml {
		known[d.UUID] = true
		next = max(next, d.Index+1)
	}
	i := 0
	for _, ad := range h.Devices {
		if ad.UUID != "" && known[ad.UUID] {
			continue
		}
		known[ad.UUID] = true
		if next+i >= store.MaxDevices {
			continue // AgentHello adds no device past the limit
		}
		want := wire.Device{Type: wire.TypeDevice, Index: next + i, UUID: ad.UUID, Name: ad.Name, Total: ad.Total}
		if i >= len(rest) || rest[i] != want {
			return false
		}
		i++
	}
	return i == len(rest)
}

// nvmlSeen marks a device as an NVML device once NVML data for it appears.
func (l *loader) nvmlSeen(dev int) {
	if !l.agentDevs[dev] {
		return
	}
	delete(l.agentDevs, dev)
	if ds := l.st.Devices(); dev < len(ds) && ds[dev].Source != "nvml" {
		d := ds[dev]
		d.Source = "nvml"
		l.in.Device(d)
	}
}
