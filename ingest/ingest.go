// Package ingest is the one way into the store and the one stream of what
// the store took in. Every source (the NVML sampler, the agent socket, the
// recording loader, remote hosts) and every user action that changes the
// store (a snapshot key, a row renamed) goes through an Ingest: Apply maps
// each wire frame type onto the store, so what a frame means is decided
// once for a live agent and a recording alike, and what the store kept
// (the frame as kept, and what it worked out from it: an agent's devices,
// its rows, their attribution) goes to the Ingest's Tap as wire frames, in
// the order the store applied them. A recorder is that Tap; the store
// itself knows nothing of recordings.
package ingest

import (
	"sync"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Tap sees what the store took in, e.g. to write a recording. NVML and
// Frame are called one at a time, in the order the store applied what they
// report, with the Ingest's lock held: they must be cheap and must not call
// back into the Ingest.
type Tap interface {
	NVML(dev int, t int64, used, reserved uint64)
	Frame(f wire.Frame)
}

// Ingest applies frames to one store and reports what it kept to its Tap.
// It is safe for concurrent use.
type Ingest struct {
	// one change at a time, so the Tap sees the store's facts in the order
	// the store applied them (a row and the samples it was computed from)
	mu  sync.Mutex
	st  *store.Store
	tap Tap
	// ask is the end-row asker (SetAsker); nil: nothing can be asked
	ask Asker
}

// Asker asks agent process pid for a holders walk of its torch device
// torchDev, without waiting for the answer (it comes as a holders frame
// through Apply): an end row's question. An agent socket's RequestHeld.
type Asker func(pid, torchDev int) error

// New returns an Ingest for st, with no Tap.
func New(st *store.Store) *Ingest { return &Ingest{st: st} }

// Store is the store the Ingest writes.
func (in *Ingest) Store() *store.Store { return in.st }

// SetTap installs the Tap; call it before sources start.
func (in *Ingest) SetTap(t Tap) { in.mu.Lock(); in.tap = t; in.mu.Unlock() }

// SetAsker installs how an end row asks its agent for a holders walk (the
// agent socket's RequestHeld); call it before sources start. Without one,
// an end row says there is no agent socket to ask through.
func (in *Ingest) SetAsker(a Asker) { in.mu.Lock(); in.ask = a; in.mu.Unlock() }

// frame reports f to the Tap; the caller holds in.mu.
func (in *Ingest) frame(f wire.Frame) {
	if in.tap != nil {
		in.tap.Frame(f)
	}
}

// Apply applies frame f of agent process pid (as gputop files it: the
// kernel's pid for a live peer, the frame's for a recording) to the store,
// and returns the rows it made (a mark's, an OOM's, a snapshot
// frame's), or the row an edit changed, as it was (none: the edit named no
// row). Frames that are about
// no process (procs, device_error, host, rows, NVML batches)
// ignore pid. A batch (wire.NVML, wire.Samples) must have been checked
// whole: its lists as long as its dt. A frame type the store has no use
// for (a socket's snap, reply, request) does nothing.
func (in *Ingest) Apply(pid int, f wire.Frame) []wire.Row {
	in.mu.Lock()
	defer in.mu.Unlock()
	st := in.st
	switch v := f.(type) {
	case wire.Hello:
		v.PID = pid
		h, added := st.AgentHello(v)
		for _, d := range added {
			in.frame(deviceFrame(d))
		}
		in.frame(h)
	case wire.Sample:
		v.PID = 0 // as the agent sends it: the store files it under pid
		in.sample(pid, v)
	case wire.Samples:
		in.applySamples(pid, &v)
	case wire.NVML:
		in.applyNVML(&v)
	case wire.Mark:
		rows := st.AgentMark(pid, v)
		in.rows(rows)
		return rows
	case wire.OOM:
		if o, row, ok := st.AgentOOM(pid, v); ok {
			in.frame(o) // its row is the event's: not recorded apart
			return []wire.Row{row}
		}
	case wire.Holders:
		if h, given, ok := st.AgentHolders(pid, v); ok {
			in.frame(h)
			in.held(given)
		}
	case wire.LayoutReading:
		if r, ok := st.AgentLayout(pid, v); ok {
			in.frame(r)
		}
	case wire.FrameworkReading:
		if r, ok := st.AgentFramework(pid, v); ok {
			in.frame(r)
		}
	case wire.Bye:
		in.ended(pid, v.T, true, "")
	case wire.Ended:
		in.ended(pid, v.T, false, v.Reason)
	case wire.RowHeld:
		in.held(st.SetHeld(pid, v.Dev, v.T, v.Held, v.Ledger, v.Frameworks))
	case wire.RowEdit:
		if row, e, ok := st.EditRow(v); ok {
			in.frame(e)
			return []wire.Row{row}
		}
	case wire.Row:
		rows := []wire.Row{st.AddRow(v)}
		in.rows(rows)
		return rows
	case wire.Procs:
		procs := st.SetProcs(v.Dev, v.T, v.Procs)
		in.frame(wire.Procs{Type: wire.TypeProcs, T: v.T, Dev: v.Dev, Procs: procs})
	case wire.DevError:
		if msg, changed := st.SetDeviceError(v.Dev, v.T, v.Error); changed {
			in.frame(wire.DevError{Type: wire.TypeDevError, T: v.T, Dev: v.Dev, Error: msg})
		}
	case wire.Host:
		if h, ok := st.SetHost(store.Host{ID: v.ID, Name: v.Name, Up: v.Up, Reason: v.Reason, Limited: v.Limited, Since: v.T}); ok {
			in.frame(wire.Host{Type: wire.TypeHost, ID: h.ID, Name: h.Name, Up: h.Up, Reason: h.Reason, Limited: h.Limited, T: h.Since})
		}
	}
	return nil
}

// AgentEnded records that agent process pid has gone at t: clean after its
// bye, or not (its connection lost, its host disconnected), with the reason
// the user is shown. A recording keeps a clean end as a bye frame, which
// holds no reason.
func (in *Ingest) AgentEnded(pid int, t int64, clean bool, reason string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ended(pid, t, clean, reason)
}

func (in *Ingest) ended(pid int, t int64, clean bool, reason string) {
	reason, given, ok := in.st.AgentEnded(pid, t, clean, reason)
	if !ok {
		return
	}
	in.held(given)
	if clean {
		in.frame(wire.Bye{Type: wire.TypeBye, PID: pid, T: t})
	} else {
		in.frame(wire.Ended{Type: wire.TypeEnded, PID: pid, T: t, Reason: reason})
	}
}

// NVML adds one NVML device sample: the sampler's 1 kHz hot path, so it
// takes no frame.
func (in *Ingest) NVML(dev int, t int64, used, reserved uint64) {
	in.mu.Lock()
	in.nvml(dev, t, used, reserved)
	in.mu.Unlock()
}

// nvml adds one NVML sample and reports it; the caller holds in.mu.
func (in *Ingest) nvml(dev int, t int64, used, reserved uint64) {
	in.st.AddNVML(dev, t, used, reserved)
	if in.tap != nil {
		in.tap.NVML(dev, t, used, reserved)
	}
}

// Device adds or updates a device NVML (or a recording of it) knows.
func (in *Ingest) Device(d store.Device) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if kept, ok := in.st.SetDevice(d); ok {
		in.frame(deviceFrame(kept))
	}
}

// HostDevice adds or finds again a remote host's device (see
// store.HostDevice) and returns its index, or -1 when no more fit.
func (in *Ingest) HostDevice(d store.Device) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	kept, ok := in.st.HostDevice(d)
	if !ok {
		return -1
	}
	in.frame(deviceFrame(kept))
	return kept.Index
}

// Rate records a device's achieved NVML sample rate (not recorded: a
// recording's rate is worked out from its samples).
func (in *Ingest) Rate(dev int, hz float64) { in.st.SetRate(dev, hz) }

// TakeSnapshot takes the rows of device dev at time t from what
// the store holds (see store.TakeSnapshot) and asks the agents of its
// rows for their holders walks (an end row's attribution, any row's
// ledger) through the asker (SetAsker), with no lock held (an agent
// server takes its own locks, and calls Apply under them).
func (in *Ingest) TakeSnapshot(label string, dev int, t int64, source string, end *bool) []wire.Row {
	in.mu.Lock()
	ask := in.ask
	rows, asks := in.st.TakeSnapshot(label, dev, t, source, end, ask != nil)
	in.rows(rows)
	in.mu.Unlock()
	for _, a := range asks {
		if err := ask(a.PID, a.TorchDev); err != nil {
			// the row says why it will get no walk
			in.mu.Lock()
			why := "could not ask for a holders walk: " + err.Error()
			in.held(in.st.SetHeld(a.PID, a.Dev, a.T, &wire.Held{T: a.T, Skipped: why}, &wire.Ledger{T: a.T, Skipped: why}, nil))
			in.mu.Unlock()
		}
	}
	return rows
}

// rows reports rows; an OOM row is its oom frame's, reported
// already.
func (in *Ingest) rows(rows []wire.Row) {
	for _, r := range rows {
		if r.OOM == nil {
			in.frame(r)
		}
	}
}

// held reports rows given their attribution or ledger.
func (in *Ingest) held(given []store.Attribution) {
	for _, a := range given {
		in.frame(wire.RowHeld{Type: wire.TypeRowHeld, PID: a.PID, T: a.T, Dev: a.Dev, Held: a.Held, Ledger: a.Ledger, Frameworks: a.Frameworks})
	}
}

// sample adds one allocator sample and reports it, filed under pid.
func (in *Ingest) sample(pid int, smp wire.Sample) {
	if in.st.AgentSample(pid, smp) {
		smp.PID = pid
		in.frame(smp)
	}
}

func deviceFrame(d store.Device) wire.Device {
	return wire.Device{Type: wire.TypeDevice, Index: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total, Host: d.Host, Memory: d.Memory}
}

// applySamples gives a batch's samples to the store one by one, as the
// agent's sample frames would have come (straight to the store: a batch
// holds thousands, and handing each over as a wire.Frame would allocate).
// The batch is checked whole before (recording.Decoder).
func (in *Ingest) applySamples(pid int, f *wire.Samples) {
	lists := f.Lists()
	t := f.T0
	var c [8]uint64
	for i, d := range f.DT {
		t += d
		for j, p := range lists {
			if len(*p) != 0 {
				c[j] += uint64((*p)[i])
			}
		}
		smp := wire.Sample{Type: wire.TypeSample, T: t, Dev: f.Dev}
		smp.SetCounters(c)
		in.sample(pid, smp)
	}
}

// applyNVML decodes an NVML batch (delta-encoded, 64-bit wrapping) into
// the device's samples.
func (in *Ingest) applyNVML(f *wire.NVML) {
	t := f.T0
	var used, res uint64
	for i, d := range f.DT {
		t += d
		used += uint64(f.Used[i])
		if len(f.Reserved) != 0 {
			res += uint64(f.Reserved[i])
		}
		in.nvml(f.Dev, t, used, res)
	}
}
