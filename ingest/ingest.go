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
// returns the snapshot rows it made (a mark's). Frames that are about no
// process (device, procs, device_error, snapshot rows) ignore pid. A frame
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
	case wire.Snapshot:
		st.AddSnapshot(v)
	case wire.Procs:
		st.SetProcs(v.Dev, v.T, v.Procs)
	case wire.DevError:
		st.SetDeviceError(v.Dev, v.T, v.Error)
	}
	return nil
}
