package view

import "testing"

func TestProcName(t *testing.T) {
	if got := ProcName([]string{"/usr/bin/python3", "/home/u/train.py", "--epochs", "10"}); got != "python3 train.py" {
		t.Errorf("ProcName = %q", got)
	}
	if got := ProcName([]string{"-c", "/tmp/gputop.sock"}); got != "python -c" {
		t.Errorf("ProcName(-c) = %q", got)
	}
	if got := ProcName(nil); got != "" {
		t.Errorf("ProcName(nil) = %q", got)
	}
}
