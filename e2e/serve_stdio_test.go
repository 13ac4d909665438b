package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// gputop serve --stdio behind a pipe nobody reads while an agent sends
// 60,000 samples: the agent's session runs to its end (serve never waits
// for the pipe), the lines that did not fit are dropped and counted in the
// stream's dropped lines, written plus dropped is every sample sent, and
// the end of standard input ends serve with the stream whole.
func TestServeStdioSlowReader(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "serve", "--stdio", "--source", "agent", "--socket", sock)
	var errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	waitFile(t, sock)
	const n = 60_000
	agentSession(t, sock, 34000, n) // fails if serve stops reading the agent
	got := make(chan []byte)
	go func() {
		var b bytes.Buffer
		b.ReadFrom(outR)
		got <- b.Bytes()
	}()
	inW.Close() // the end of standard input ends serve
	data := <-got
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v: %s", err, errOut.String())
	}
	st := store.New(store.DefaultOptions())
	info, err := recording.LoadReader("stdout", bytes.NewReader(data), st)
	if err != nil {
		t.Fatal(err)
	}
	written, dropped := agentSamples(t, data), int(info.Dropped.AgentSamples)
	if dropped == 0 || written+dropped != n {
		t.Fatalf("%d written + %d dropped, want %d sent (stderr: %s)", written, dropped, n, errOut.String())
	}
	t.Logf("%d of %d agent samples written, %d dropped and counted in the stream", written, n, dropped)
}
