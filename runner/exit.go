package runner

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Ended says how the command ended: its exit code for a shell (128+n for a
// death by signal n, as a shell gives it) and the words for it.
func Ended(ps *os.ProcessState) (code int, how string) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		sig := ws.Signal()
		how = fmt.Sprintf("killed by signal %d (%s)", int(sig), signalName(sig))
		if ws.CoreDump() {
			how += ", core dumped"
		}
		return 128 + int(sig), how
	}
	code = ps.ExitCode()
	return code, fmt.Sprintf("exited with code %d", code)
}

func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return strings.ToUpper(sig.String())
}
