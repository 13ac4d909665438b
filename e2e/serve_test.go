package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// startServe runs `gputop serve --source agent` in dir with more args.
func startServe(t *testing.T, dir, sock string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--source", "agent", "--socket", sock}, args...)...)
	cmd.Dir = dir
	out := &lockedBuffer{}
	cmd.Stderr, cmd.Stdout = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return cmd, out
		}
		if time.Now().After(end) {
			t.Fatalf("gputop serve made no socket:\n%s", out)
		}
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// gputop serve runs with no terminal until SIGTERM (or SIGINT): without
// -o it writes nothing anywhere; with -o FILE the recording it flushes on
// SIGTERM holds the agent, its rank and its samples.
func TestServeWritesOnlyWithO(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		dir := t.TempDir()
		sockDir := t.TempDir()
		sock := filepath.Join(sockDir, "gputop.sock")
		cmd, out := startServe(t, dir, sock)
		agentSession(t, sock, 6100, 20)
		cmd.Process.Signal(sig)
		if code := exitCode(t, cmd); code != 0 || strings.Contains(out.String(), "panic") {
			t.Fatalf("%v: exit %d\n%s", sig, code, out)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("serve without -o wrote %v", ents)
		}
	}

	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "gputop.sock")
	rec := filepath.Join(dir, "node.gputop")
	if out, code := run(t, "serve", "--stdio", "-o", rec); code != 2 || !strings.Contains(out, "--stdio and -o: one stream at a time") {
		t.Fatalf("serve --stdio -o: exit %d\n%s", code, out)
	}
	cmd, out := startServe(t, dir, sock, "-o", rec)
	a := startRankAgent(t, sock, 6200, 1)
	for i := range 50 {
		a.sample(0, uint64(i+1)<<20)
	}
	a.send(`{"type":"bye","t":%d}`, time.Now().UnixNano())
	// gputop closes the connection once it has taken in the bye
	a.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := a.c.Read(make([]byte, 1)); n != 0 || err == nil || os.IsTimeout(err) {
		t.Fatalf("after bye: read %d, %v", n, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	st := store.New(store.DefaultOptions())
	if _, err := recording.Load(rec, st); err != nil {
		t.Fatal(err)
	}
	ag := st.Agents()
	if len(ag) != 1 || ag[0].Place != (wire.Place{Rank: 1, LocalRank: 1, WorldSize: 2, Job: "e2e-job-7"}) {
		t.Fatalf("agents in the recording: %+v", ag)
	}
	if n := st.Count(store.Key{Dev: 0, PID: 6200, Metric: store.Allocated}); n != 50 {
		t.Errorf("%d samples recorded, want 50", n)
	}
}
