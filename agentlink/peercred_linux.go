package agentlink

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// peerCred returns the uid and pid of the process at the other end, as the
// kernel recorded them when it connected (SO_PEERCRED).
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// nsPID reads the NSpid line of /proc/PID/status: the process's pid in each
// pid namespace from the one /proc belongs to down to its own. A process in
// a container started from here has two or more; the last is the pid it
// knows itself by (os.getpid() inside the container).
func nsPID(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		var out []int
		for _, f := range strings.Fields(rest) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	return nil
}
