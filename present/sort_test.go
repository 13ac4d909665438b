package present

import (
	"fmt"
	"testing"
)

func TestSortProcesses(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	rows := []Process{
		{PID: 30, Used: u(100)},
		{PID: 10, Used: u(300), Allocated: u(5)},
		{PID: 20, Allocated: u(50)},
		{PID: 40, Used: u(300)},
	}
	pids := func() string {
		s := ""
		for _, r := range rows {
			s += fmt.Sprint(r.PID, " ")
		}
		return s
	}
	for _, tc := range []struct {
		o    ProcessOrder
		want string
	}{
		{ByUsed, "10 40 30 20 "},      // the most NVML used first; a tie by pid; none last
		{ByAllocated, "20 10 30 40 "}, // the most allocated first; no agent last, by pid
		{ByPID, "10 20 30 40 "},
	} {
		SortProcesses(rows, tc.o)
		if got := pids(); got != tc.want {
			t.Errorf("order %d: pids %s, want %s", tc.o, got, tc.want)
		}
	}
	if ByPID.Next() != ByUsed || ByUsed.Next() != ByAllocated || ByAllocated.Next() != ByPID {
		t.Error("Next does not cycle pid, used, allocated")
	}
}
