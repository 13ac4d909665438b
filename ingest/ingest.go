// Package ingest is the one way frames reach the store. The agent socket
// (agentlink) and the recording loader decode lines into typed wire frames,
// check them with wire.Check, and hand them here; Apply maps each frame
// type onto the store, so what a frame means is decided once for a live
// agent and a recording alike.
package ingest

import (
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Apply applies frame f of agent process pid (as gputop files it: the
// kernel's pid for a live peer, the frame's for a recording) to st, and
// returns the snapshot rows it made (a mark's), or the row an edit
// changed, as it was (none: the edit named no row). Frames that are about no
// process (device, procs, device_error, snapshot rows, NVML batches)
// ignore pid. A batch (wire.NVML, wire.Samples) must have been checked
// whole: its lists as long as its dt. A frame
// type the store has no use for (a socket's snap, reply, request) does
// nothing.
func Apply(st *store.Store, pid int, f wire.Frame) []wire.Snapshot {
	switch v := f.(type) {
	case wire.Hello:
		v.PID = pid
		st.AgentHello(v)
	case wire.Sample:
		v.PID = 0 // as the agent sends it: the store files it under pid
		st.AgentSample(pid, v)
	case wire.Samples:
		applySamples(st, pid, &v)
	case wire.NVML:
		applyNVML(st, &v)
	case wire.Mark:
		return st.AgentMark(pid, v)
	case wire.OOM:
		st.AgentOOM(pid, v)
	case wire.Holders:
		st.AgentHolders(pid, v)
	case wire.Bye:
		st.AgentEnded(pid, v.T, true, "")
	case wire.Ended:
		st.AgentEnded(pid, v.T, false, v.Reason)
	case wire.RowHeld:
		st.SetHeld(pid, v.Dev, v.T, v.Held)
	case wire.RowEdit:
		if row, ok := st.EditRow(v); ok {
			return []wire.Snapshot{row}
		}
	case wire.Snapshot:
		st.AddSnapshot(v)
	case wire.Procs:
		st.SetProcs(v.Dev, v.T, v.Procs)
	case wire.DevError:
		st.SetDeviceError(v.Dev, v.T, v.Error)
	case wire.Host:
		st.SetHost(store.Host{ID: v.ID, Name: v.Name, Up: v.Up, Reason: v.Reason, Since: v.T})
	}
	return nil
}

// applySamples gives a batch's samples to the store one by one, as the
// agent's sample frames would have come (straight to the store: a batch
// holds thousands, and handing each over as a wire.Frame would allocate).
// The batch is checked whole before (recording.Decoder).
func applySamples(st *store.Store, pid int, f *wire.Samples) {
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
		st.AgentSample(pid, smp)
	}
}

// applyNVML decodes an NVML batch (delta-encoded, 64-bit wrapping) into
// the device's samples.
func applyNVML(st *store.Store, f *wire.NVML) {
	t := f.T0
	var used, res uint64
	for i, d := range f.DT {
		t += d
		used += uint64(f.Used[i])
		if len(f.Reserved) != 0 {
			res += uint64(f.Reserved[i])
		}
		st.AddNVML(f.Dev, t, used, res)
	}
}
