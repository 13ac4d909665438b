package remote

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
)

// fakeSSH writes an executable that stands in for ssh: its nth run (from
// 1) does what runs[n-1] says, a shell fragment; past the list it fails
// as ssh does when the host is unreachable. header is a stream header
// this gputop takes, for the fragments to print.
func fakeSSH(t *testing.T, runs ...string) (path string) {
	t.Helper()
	dir := t.TempDir()
	header := fmt.Sprintf(`{"type":"recording","v":%d,"start":%d,"tool":"%s"}`, recording.FormatVersion, time.Now().UnixNano(), tool)
	var cases strings.Builder
	for i, r := range runs {
		fmt.Fprintf(&cases, "%d) %s;;\n", i+1, r)
	}
	path = filepath.Join(dir, "ssh")
	script := fmt.Sprintf(`#!/bin/sh
header='%s'
echo run >>%[2]s/runs
case $(wc -l <%[2]s/runs) in
%s*) echo "ssh: connect to host fake: Connection refused" >&2; exit 255;;
esac
`, header, dir, cases.String())
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// The wait before a reconnection doubles with each failure, comes back to
// the first step after a stream that stayed up for StableAfter, and keeps
// doubling after one that ended sooner.
func TestBackoff(t *testing.T) {
	const stable = 300 * time.Millisecond
	ssh := fakeSSH(t,
		"exit 255", "exit 255", "exit 255",
		`echo "$header"; sleep 0.6; exit 0`, // up for longer than StableAfter
		"exit 255",
		`echo "$header"; exit 0`, // up, but not for long
	)
	in := ingest.New(store.New(store.DefaultOptions()))
	logs := make(chan string, 64)
	s := New(in, 1, Options{Host: "fake", SSH: []string{ssh}, Tool: tool, Log: func(l string) { logs <- l },
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 10 * time.Second, StableAfter: stable})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	want := []string{"20ms", "40ms", "80ms", "20ms", "40ms", "80ms", "160ms"}
	var got []string
	for len(got) < len(want) {
		select {
		case l := <-logs:
			if i := strings.LastIndex(l, "(retrying in "); i >= 0 {
				got = append(got, strings.TrimSuffix(l[i+len("(retrying in "):], ")"))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("waits %v so far, want %v", got, want)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("waits before each reconnection %v, want %v", got, want)
	}
}
