package sampler

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// commLen is the longest name the kernel keeps in /proc/PID/comm
// (TASK_COMM_LEN-1); a name of exactly this length may have been cut.
const commLen = 15

// unknownName stands for a process whose name cannot be read (gone already,
// or in another PID namespace than gputop).
const unknownName = "?"

// procNames caches process names by pid. NVML reports the same few pids ten
// times a second, so each name is read from /proc once. A pid not seen in a
// refresh round is forgotten, so a recycled pid is read afresh.
// It is used by one goroutine only.
type procNames struct {
	root  string // "/proc"; tests point it at a directory of their own
	round uint64
	m     map[int]nameEntry
}

type nameEntry struct {
	name string
	seen uint64 // round in which the pid was last looked up
}

func newProcNames(root string) *procNames {
	return &procNames{root: root, m: map[int]nameEntry{}}
}

// begin starts a refresh round.
func (c *procNames) begin() { c.round++ }

// lookup returns the name of pid, reading /proc on the first lookup.
// Failed reads are not cached: a process that has just started may have
// its /proc entry moments later.
func (c *procNames) lookup(pid int) string {
	if e, ok := c.m[pid]; ok {
		e.seen = c.round
		c.m[pid] = e
		return e.name
	}
	name := readProcName(c.root, pid)
	if name != unknownName {
		c.m[pid] = nameEntry{name: name, seen: c.round}
	}
	return name
}

// sweep forgets the pids not looked up since begin.
func (c *procNames) sweep() {
	for pid, e := range c.m {
		if e.seen != c.round {
			delete(c.m, pid)
		}
	}
}

// readProcName returns the process name from root/PID/comm, falling back to
// the basename of argv[0] from root/PID/cmdline, then to "?". A comm cut at
// the kernel's 15 characters is completed from cmdline when they agree.
func readProcName(root string, pid int) string {
	dir := filepath.Join(root, strconv.Itoa(pid))
	comm := ""
	if b, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		comm = strings.TrimSpace(string(b))
	}
	if comm != "" && len(comm) < commLen {
		return comm
	}
	if arg0 := cmdlineName(dir); arg0 != "" && (comm == "" || strings.HasPrefix(arg0, comm)) {
		return arg0
	}
	if comm != "" {
		return comm
	}
	return unknownName
}

// cmdlineName returns the basename of argv[0], or "" (kernel threads and
// zombies have an empty cmdline).
func cmdlineName(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return ""
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	arg0 := strings.TrimSpace(string(b))
	if arg0 == "" {
		return ""
	}
	return filepath.Base(arg0)
}
