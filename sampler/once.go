// One reading of every GPU, for `gputop status` when no gputop runs.

package sampler

import "time"

// ReadOnce reads every GPU's memory and process list once into the
// store, after Init: what `gputop status` reports when no gputop is
// running. A device that cannot be read shows its error instead.
func (n *NVML) ReadOnce() {
	n.tick(time.Now())
	n.refreshProcs()
}
