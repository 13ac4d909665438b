// What one host may put into the local store, bounded where its frames
// enter (conn.apply). A broken or hostile remote (its gputop, or the
// processes its agents run in) could otherwise fill gputop's memory with
// hellos, take every device slot and so hide the other hosts' GPUs, or
// grow process lists without end. What a bound keeps out is counted per
// connection, logged the first time each bound bites, and shown with the
// host's state (store.Host.Limited).

package remote

import (
	"fmt"
	"strings"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/units"
)

const (
	// MaxHelloBytes bounds a remote hello's line. A training command line
	// is a few KiB; the store keeps every hello, so 200 hellos of the
	// 4 MiB a stream's line may hold took 800 MiB. A longer hello is
	// refused: the process shows in NVML's list without allocator figures.
	MaxHelloBytes = 64 << 10
	// MaxAgents bounds the agents one host has connected at once (a node
	// runs a process per GPU, a few per GPU at most); a hello past it is
	// refused.
	MaxAgents = 256
	// MaxProcs bounds an NVML process list of one remote device (a row's
	// too); the processes using the least memory are left out.
	MaxProcs = 1024
	// maxRefused bounds the refused pids a connection remembers in order
	// to drop their later frames.
	maxRefused = 4 * MaxAgents
)

// DeviceShare is each host's share of the store's devices (MaxDevices)
// when hosts remote hosts, and with local this machine too, share them:
// one host sending thousands of devices cannot leave none for the others.
func DeviceShare(hosts int, local bool) int {
	if local {
		hosts++
	}
	return store.MaxDevices / max(hosts, 1)
}

// limits counts what the bounds kept out of one connection's stream.
type limits struct {
	bigHellos    int // hellos over MaxHelloBytes
	agents       int // hellos past MaxAgents connected
	devices      int // devices past the host's share, or with the store full
	helloDevices int // devices a hello named that the host's stream did not list
	procs        int // NVML process entries past MaxProcs
	frames       int // frames of agents whose hello was refused
}

// text is the limits as the host's state shows them ("" when none bit);
// share is the host's device share.
func (l limits) text(share int) string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	max := units.Bytes(MaxHelloBytes)
	add(l.bigHellos, "hello over "+max, "hellos over "+max)
	add(l.agents, fmt.Sprintf("agent past %d", MaxAgents), fmt.Sprintf("agents past %d", MaxAgents))
	add(l.devices, fmt.Sprintf("device past its share of %d", share), fmt.Sprintf("devices past its share of %d", share))
	add(l.helloDevices, "hello device not in its stream", "hello devices not in its stream")
	add(l.procs, fmt.Sprintf("NVML process past %d a GPU", MaxProcs), fmt.Sprintf("NVML processes past %d a GPU", MaxProcs))
	add(l.frames, "frame of a refused agent", "frames of refused agents")
	if len(parts) == 0 {
		return ""
	}
	return "left out " + strings.Join(parts, ", ")
}
