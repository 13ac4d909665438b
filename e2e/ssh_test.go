package e2e

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// sshHost is a real sshd on loopback, started by the test with its own
// configuration, host key and user key (no system sshd configuration is
// read or touched), serving `gputop serve --stdio` of the real binary
// through a wrapper that gives it a socket of its own.
type sshHost struct {
	dir    string
	port   int
	config string // ssh -F: the hosts below, each on this sshd
	sock   string // the remote gputop's agent socket
	// where bad-b's garbage starts: the length of the header before it
	garbageAt int
}

// startSSHD starts sshd and writes an ssh client configuration naming
// hosts: gpu-a (a remote gputop), bad-b (a header, then garbage), old-c (a
// gputop of another version), down-d (a port where nothing listens) and
// flood-e (what the test wrote to h.dir/flood, then nothing).
func startSSHD(t *testing.T) *sshHost {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("sshd (Debian's openssh-server) is needed for this test: %v", err)
	}
	// sshd's privilege separation directory, compiled in; a container
	// without a running sshd may lack it
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	h := &sshHost{dir: t.TempDir()}
	h.sock = filepath.Join(h.dir, "remote.sock")
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(h.dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	copyFile(t, filepath.Join(h.dir, "user_key.pub"), filepath.Join(h.dir, "authorized_keys"))
	h.port = freePort(t)
	closed := freePort(t)
	write(t, filepath.Join(h.dir, "sshd_config"), fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_key
PidFile %[2]s/sshd.pid
AuthorizedKeysFile %[2]s/authorized_keys
# the tests run as root, here and in CI
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv GPUTOP_TEST_REMOTE
PrintMotd no
LogLevel VERBOSE
`, h.port, h.dir), 0o600)
	hostKey, err := os.ReadFile(filepath.Join(h.dir, "host_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(h.dir, "known_hosts"), fmt.Sprintf("[127.0.0.1]:%d %s", h.port, hostKey), 0o600)
	var cfg strings.Builder
	for _, host := range []struct {
		name, mode string
		port       int
	}{{"gpu-a", "gputop", h.port}, {"bad-b", "garbage", h.port}, {"old-c", "old", h.port}, {"down-d", "gputop", closed}, {"flood-e", "flood", h.port}} {
		fmt.Fprintf(&cfg, `Host %s
  HostName 127.0.0.1
  Port %d
  User root
  IdentityFile %[3]s/user_key
  IdentitiesOnly yes
  UserKnownHostsFile %[3]s/known_hosts
  StrictHostKeyChecking yes
  SetEnv GPUTOP_TEST_REMOTE=%s
  ConnectTimeout 5
`, host.name, host.port, h.dir, host.mode)
	}
	h.config = filepath.Join(h.dir, "ssh_config")
	write(t, h.config, cfg.String(), 0o600)
	// the remote gputop: serve --stdio of the real binary, or what a
	// broken remote sends (until its standard input ends, as serve --stdio does)
	write(t, filepath.Join(h.dir, "remote-gputop"), fmt.Sprintf(`#!/bin/sh
case "$GPUTOP_TEST_REMOTE" in
garbage)
	cat %[3]s/garbage
	exec cat >/dev/null;;
old)
	cat %[3]s/old
	exec cat >/dev/null;;
flood)
	cat %[3]s/flood
	exec cat >/dev/null;;
esac
exec %[1]s "$@" --source agent --socket %[2]s
`, binary, h.sock, h.dir), 0o755)
	header := func(tool string) string {
		return fmt.Sprintf(`{"type":"recording","v":%d,"start":%d,"tool":"%s"}`, recording.FormatVersion, time.Now().UnixNano(), tool) + "\n"
	}
	h.garbageAt = len(header("gputop " + gputopVersion(t)))
	// the garbage tries to retitle the terminal: its reason must not
	write(t, filepath.Join(h.dir, "garbage"), header("gputop "+gputopVersion(t))+"\x1b]0;pwned\x07 this is no frame\n", 0o644)
	write(t, filepath.Join(h.dir, "old"), header("gputop 0.0.9"), 0o644)

	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(h.dir, "sshd_config"))
	log, err := os.Create(filepath.Join(h.dir, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("sshd log:\n%s", b)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", h.port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("sshd never listened: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h
}

// env is what gputop needs to reach the hosts: $GPUTOP_SSH with the
// test's client configuration.
func (h *sshHost) env() string { return "GPUTOP_SSH=ssh -F " + h.config }

func (h *sshHost) gputop() string { return filepath.Join(h.dir, "remote-gputop") }

// remotePIDs are the remote gputops serving h (their command line names
// its socket).
func (h *sshHost) remotePIDs(t *testing.T) []int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[0] == binary && args[1] == "serve" && strings.Contains(string(b), h.sock) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func gputopVersion(t *testing.T) string {
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "gputop ")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func write(t *testing.T, path, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	write(t, to, string(b), 0o600)
}

// remoteAgent streams known allocator values to the remote gputop's
// socket, 20 a second, connecting again whenever the connection ends (the
// remote gputop killed and started again), until stop is closed.
func remoteAgent(t *testing.T, sock string, allocated uint64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, `{"type":"hello","v":1,"pid":%d,"argv":["remote_train.py"],"torch":"2.11.0","rank":"3","local_rank":"1","world_size":"8","job":"e2e-ssh","devices":[{"index":0,"uuid":"GPU-remote-a","name":"Remote GPU","total":85899345920}],"t":%d}`+"\n", os.Getpid(), time.Now().UnixNano())
		fmt.Fprintf(w, `{"type":"mark","t":%d,"label":"remote epoch","devs":[{"dev":0,"allocated":%d,"reserved":%d,"peak":%d}]}`+"\n", time.Now().UnixNano(), allocated, 2*allocated, 3*allocated)
		for err == nil {
			fmt.Fprintf(w, `{"type":"sample","t":%d,"dev":0,"allocated":%d,"reserved":%d,"peak":%d}`+"\n", time.Now().UnixNano(), allocated, 2*allocated, 3*allocated)
			err = w.Flush()
			select {
			case <-stop:
				c.Close()
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		c.Close()
	}
}

// gputop --ssh in a real terminal over a real sshd: the remote process with
// its allocator figures under its host; a remote gputop killed shows its
// host disconnected with ssh's reason, then connected again with the
// process back; a host sending garbage, one of another version and one
// that cannot be reached each show why, and gpu-a carries on beside them.
func TestSSHHostsInOneView(t *testing.T) {
	h := startSSHD(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); remoteAgent(t, h.sock, 777<<20, stop) }()
	t.Cleanup(func() { close(stop); <-done })

	tm := startTermEnv(t, 220, 50, []string{h.env()}, "--ssh", "gpu-a,bad-b,old-c,down-d", "--ssh-gputop", h.gputop())
	proc := fmt.Sprintf("gpu-a:%d", os.Getpid())
	scr := tm.waitFor(proc)
	tm.waitFor("777.0 MiB")
	tm.waitFor("rank 3/8") // the remote agent's place in its job, as it told its own gputop
	scr = tm.waitFor("gpu-a connected")
	for _, want := range []string{
		"gpu-a: Remote GPU",
		"remote_train.py",
		fmt.Sprintf("bad-b disconnected: bad stream: bad-b's stream: byte %d (line 2): invalid JSON at column 1: invalid character '\\x1b' looking for beginning of value", h.garbageAt),
		"old-c disconnected: old-c runs gputop 0.0.9, this is gputop " + gputopVersion(t),
		"down-d disconnected: ssh down-d failed (status 255): ssh: connect to host 127.0.0.1 port",
	} {
		if !strings.Contains(scr, want) {
			scr = tm.waitFor(want)
		}
	}
	// each failure doubles the wait: the next wait down-d shows is twice
	// the one it shows now (whichever that is by now: on a loaded machine
	// the checks above can take longer than the first few waits)
	wait := func(scr string) time.Duration {
		line := hostLine(scr, "down-d")
		i := strings.LastIndex(line, "(retrying in ")
		if i < 0 {
			return 0
		}
		d, _ := time.ParseDuration(strings.TrimSuffix(line[i+len("(retrying in "):], ")"))
		return d
	}
	first := wait(tm.waitFor("Connection refused (retrying in "))
	next := first
	for end := time.Now().Add(time.Minute); next == first; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("down-d still waits %v a minute later:\n%s", first, tm.screen())
		}
		next = wait(tm.screen())
	}
	if first < time.Second || next != min(2*first, 30*time.Second) {
		t.Fatalf("down-d waited %v, then %v: want each wait twice the one before (at most 30s)", first, next)
	}
	if c := tm.capture(); strings.Contains(c, "pwned") || strings.Contains(c, "\x1b]") || tm.title() == "pwned" {
		t.Fatalf("the garbage's title sequence reached the terminal (title %q)", tm.title())
	}

	pids := h.remotePIDs(t)
	if len(pids) != 1 {
		t.Fatalf("want one remote gputop serving gpu-a, found %v", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	scr = tm.waitFor("gpu-a disconnected: the stream ended: ssh gpu-a exited with status ")
	t.Logf("killed: %s", hostLine(scr, "gpu-a"))
	scr = tm.waitFor("gpu-a connected")
	tm.waitFor(proc)
	if got := h.remotePIDs(t); len(got) != 1 || got[0] == pids[0] {
		t.Fatalf("want a new remote gputop after the reconnection, have %v (killed %d)", got, pids[0])
	}

	// quitting ends the remote gputop too: ssh closes its standard input
	tm.keys("q")
	tm.waitExit()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.remotePIDs(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("remote gputop %v still running after gputop quit", h.remotePIDs(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startTermEnv is startTerm with environment variables for gputop.
func startTermEnv(t *testing.T, w, h int, env []string, args ...string) *term {
	t.Helper()
	full := append([]string{"env"}, env...)
	full = append(full, binary)
	full = append(full, args...)
	return startTermCmd(t, w, h, full...)
}

// gputop record --ssh keeps the hosts: the header lists them, the device
// and the process load back under their host.
func TestSSHRecordKeepsHosts(t *testing.T) {
	h := startSSHD(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); remoteAgent(t, h.sock, 555<<20, stop) }()
	t.Cleanup(func() { close(stop); <-done })
	rec := filepath.Join(t.TempDir(), "hosts.gputop")
	cmd := exec.Command(binary, "record", "-o", rec, "--ssh", "gpu-a", "--ssh-gputop", h.gputop())
	cmd.Env = append(os.Environ(), h.env())
	var errOut lockedBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errOut.waitFor(t, "gpu-a: connected")
	// the samples reach the recording: wait for the process's batches
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(rec)
		if strings.Contains(string(b), `"type":"samples"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no samples recorded; stderr:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()

	st := store.New(store.DefaultOptions())
	info, err := recording.Load(rec, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Header.Hosts; len(got) != 1 || got[0] != "gpu-a" {
		t.Fatalf("header hosts %q, want [gpu-a]", got)
	}
	if hs := st.Hosts(); len(hs) != 1 || hs[0].Name != "gpu-a" || hs[0].ID != 1 {
		t.Fatalf("hosts %+v", hs)
	}
	devs := st.Devices()
	if len(devs) != 1 || devs[0].Host != "gpu-a" || devs[0].UUID != "GPU-remote-a" {
		t.Fatalf("devices %+v", devs)
	}
	key := store.HostPID(1, os.Getpid())
	v, _, ok := st.Latest(store.Key{Dev: 0, PID: key, Metric: store.Allocated})
	if !ok || v != 555<<20 {
		t.Fatalf("allocated of %s: %d (%v), want %d", st.PIDLabel(key), v, ok, 555<<20)
	}
	if got, want := st.PIDLabel(key), fmt.Sprintf("gpu-a:%d", os.Getpid()); got != want {
		t.Fatalf("label %q, want %q", got, want)
	}

	// export: the remote's row with its host and the host's own pid
	out, errText, code := runSplit(t, "export", rec, "--csv", "-")
	if code != 0 {
		t.Fatalf("export exit %d: %s", code, errText)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	row := recs[1]
	if row[col["label"]] != "remote epoch" || row[col["host"]] != "gpu-a" || row[col["pid"]] != fmt.Sprint(os.Getpid()) ||
		row[col["allocated_bytes"]] != fmt.Sprint(555<<20) || row[col["device_name"]] != "Remote GPU" {
		t.Fatalf("exported row %v", row)
	}
}

// hostLine is the header's line of a host.
func hostLine(screen, host string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), host+" ") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
