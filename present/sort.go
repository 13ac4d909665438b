package present

import "slices"

// ProcessOrder is an order of the process pane.
type ProcessOrder int

// The orders a key cycles through, in that order: by pid (NVML's list as
// Processes returns it), then the most NVML memory first, then the most
// torch-allocated memory first (a process without torch figures by the
// in-use of the framework that stands in for them: Process.Stand). A
// process without the value sorted on (no agent, no NVML figure) goes
// after those with one, by pid.
const (
	ByPID ProcessOrder = iota
	ByUsed
	ByAllocated
	nOrders
)

// Next is the order after o.
func (o ProcessOrder) Next() ProcessOrder { return (o + 1) % nOrders }

// SortProcesses orders rows in place by o; ties keep pid order.
func SortProcesses(rows []Process, o ProcessOrder) {
	val := func(p *Process) *uint64 {
		switch o {
		case ByUsed:
			return p.Used
		case ByAllocated:
			if p.Allocated == nil && p.Stand != nil {
				return &p.Stand.InUse.Value
			}
			return p.Allocated
		}
		return nil
	}
	slices.SortStableFunc(rows, func(a, b Process) int {
		if o != ByPID {
			va, vb := val(&a), val(&b)
			switch {
			case va != nil && vb == nil:
				return -1
			case va == nil && vb != nil:
				return 1
			case va != nil && *va != *vb:
				if *va > *vb {
					return -1
				}
				return 1
			}
		}
		return a.PID - b.PID
	})
}
