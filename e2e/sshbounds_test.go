package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// writeFlood writes what flood-e sends over the real sshd: a header of
// this gputop, 1024 devices, 10 hellos of 200 KiB and 300 small ones.
func writeFlood(t *testing.T, h *sshHost) {
	t.Helper()
	f, err := os.Create(filepath.Join(h.dir, "flood"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	now := time.Now().UnixNano()
	fmt.Fprintf(w, `{"type":"recording","v":%d,"start":%d,"tool":"gputop %s"}`+"\n", recording.FormatVersion, now, gputopVersion(t))
	for i := range store.MaxDevices {
		fmt.Fprintf(w, `{"type":"device","index":%d,"uuid":"GPU-flood-%d","name":"Flood GPU","total":85899345920}`+"\n", i, i)
	}
	hello := func(pid int, arg string) {
		fmt.Fprintf(w, `{"type":"hello","v":1,"pid":%d,"argv":["flood.py","%s"],"devices":[{"index":0,"uuid":"GPU-flood-0"}],"t":%d}`+"\n", pid, arg, now)
	}
	for pid := 1000; pid < 1010; pid++ {
		hello(pid, strings.Repeat("x", 200<<10))
	}
	for pid := 2000; pid < 2300; pid++ {
		hello(pid, "small")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// gputop record --ssh gpu-a,flood-e over a real sshd, flood-e sending
// 1024 devices, hellos of 200 KiB and 300 agents: flood-e gets its share
// of the devices (half: two hosts), hellos within the bound and 256 agents;
// gpu-a's GPU and process are still there; each bound is logged and the
// host's state (recorded) counts what was left out.
func TestSSHHostBounds(t *testing.T) {
	h := startSSHD(t)
	writeFlood(t, h)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); remoteAgent(t, h.sock, 333<<20, stop) }()
	t.Cleanup(func() { close(stop); <-done })
	rec := filepath.Join(t.TempDir(), "bounds.gputop")
	cmd := exec.Command(binary, "record", "-o", rec, "--ssh", "gpu-a,flood-e", "--ssh-gputop", h.gputop())
	cmd.Env = append(os.Environ(), h.env())
	var errOut lockedBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	errOut.waitFor(t, "flood-e: connected")
	errOut.waitFor(t, "gpu-a: connected")
	const limited = `"limited":"left out 10 hellos over 64.0 KiB, 44 agents past 256, 512 devices past its share of 512"`
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(rec)
		if strings.Contains(string(b), limited) && strings.Contains(string(b), `"type":"samples"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recording never held flood-e's %s and gpu-a's samples; stderr:\n%s", limited, errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	for _, want := range []string{
		"flood-e: its device 512 is not shown: flood-e has 512 devices, its share of the 1024 gputop keeps (the host's state counts the rest)",
		"flood-e: pid 1000's hello of 200.1 KiB is refused: a remote hello may hold 64.0 KiB; the process shows without allocator figures (the host's state counts the rest)",
		"flood-e: pid 2256's hello is refused: 256 agents of flood-e are connected, the most gputop takes from one host (the host's state counts the rest)",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}

	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(rec, st); err != nil {
		t.Fatal(err)
	}
	perHost := map[string]int{}
	for _, d := range st.Devices() {
		perHost[d.Host]++
	}
	if perHost["flood-e"] != 512 || perHost["gpu-a"] != 1 || len(perHost) != 2 {
		t.Errorf("devices per host %v, want flood-e 512, gpu-a 1", perHost)
	}
	agents := map[int]int{}
	for _, a := range st.Agents() {
		host, _ := store.SplitPID(a.Hello.PID)
		agents[host]++
	}
	if agents[1] != 1 || agents[2] != 256 {
		t.Errorf("agents per host id %v, want gpu-a (1) 1, flood-e (2) 256", agents)
	}
	key := store.HostPID(1, os.Getpid())
	if v, _, ok := st.Latest(store.Key{Dev: st.DeviceByUUID("GPU-remote-a"), PID: key, Metric: store.Allocated}); !ok || v != 333<<20 {
		t.Errorf("gpu-a's process: allocated %d (%v), want %d", v, ok, 333<<20)
	}
	for _, hs := range st.Hosts() {
		if hs.Name == "flood-e" && !strings.Contains(limited, hs.Limited) || hs.Name == "gpu-a" && hs.Limited != "" {
			t.Errorf("host %+v", hs)
		}
	}
}
