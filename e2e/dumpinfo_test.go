package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gputop dump-info on the real H200 dumps: the OOM's request and the line
// that allocated what filled the GPU; a file cut short or not a pickle
// exits 1 with the byte offset.
func TestDumpInfoCLI(t *testing.T) {
	oom := filepath.Join("..", "testdata", "memdump", "oom.pickle")
	out, code := run(t, "dump-info", oom)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	lines := strings.Split(out, "\n")
	var first string
	for i, l := range lines {
		if strings.Contains(l, "bytes  blocks  frame") && i+1 < len(lines) {
			first = lines[i+1]
		}
	}
	if !strings.Contains(out, "out of memory: 8.00 GiB asked for at") ||
		!strings.Contains(first, "make_dumps.py:61 <module>") || !strings.Contains(first, "      17  ") {
		t.Errorf("the OOM or its top frame (17 blocks at make_dumps.py:61) is not shown:\n%s", out)
	}

	whole, err := os.ReadFile(oom)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pickle")
	os.WriteFile(cut, whole[:5000], 0o644)
	out, code = run(t, "dump-info", cut)
	if code != 1 || !strings.Contains(out, "truncated at byte 5000") {
		t.Errorf("a dump cut at 5000 bytes: exit %d:\n%s", code, out)
	}
	out, code = run(t, "dump-info", filepath.Join("..", "README.md"))
	if code != 1 || !strings.Contains(out, "not a readable pickle at byte 0") {
		t.Errorf("README.md as a dump: exit %d:\n%s", code, out)
	}
	if out, code = run(t, "dump-info"); code != 2 {
		t.Errorf("no FILE: exit %d:\n%s", code, out)
	}
}

// runFor is run with a time limit: a reader that spins is killed and the
// test fails instead of waiting for it.
func runFor(t *testing.T, limit time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gputop %s still running after %v:\n%s", strings.Join(args, " "), limit, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// Hostile dumps (testdata/memdump/hostile, make_hostile.py): a length
// declared past the end of the file, which once killed dump-info with an
// unrecoverable out-of-memory, is a truncation at the byte where the file
// ends; 82 KB of shared references, which once kept it busy for hours,
// run out of visits; a pickle of nested lists runs out of memory budget;
// a FIFO is refused without blocking. Each exits 1 with the file named.
func TestDumpInfoHostile(t *testing.T) {
	hostile := filepath.Join("..", "testdata", "memdump", "hostile")
	for _, c := range []struct{ file, want string }{
		{"frame-100g.pickle", "frame-100g.pickle: truncated at byte 13: FRAME at byte 2 declares 107374182400 bytes (100.0 GiB), 2 are left in the file"},
		{"binunicode8-100g.pickle", "binunicode8-100g.pickle: truncated at byte 12: BINUNICODE8 at byte 2 declares 107374182400 bytes (100.0 GiB), 1 are left in the file"},
		{"binbytes8-1t.pickle", "binbytes8-1t.pickle: truncated at byte 12: BINBYTES8 at byte 2 declares 1099511627776 bytes (1024.0 GiB), 1 are left in the file"},
		{"bytearray8-1t.pickle", "bytearray8-1t.pickle: truncated at byte 12: BYTEARRAY8 at byte 2 declares 1099511627776 bytes (1024.0 GiB), 1 are left in the file"},
		{"shared-refs.pickle", "shared-refs.pickle: over the reader's budget of 1377616 visits (4 for each byte of its 80.3 KiB, plus 1048576)"},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, code := runFor(t, time.Minute, "dump-info", filepath.Join(hostile, c.file))
			if code != 1 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d:\n%s\nwant %q", code, out, c.want)
			}
		})
	}
	t.Run("nested", func(t *testing.T) {
		nested := filepath.Join(t.TempDir(), "nested.pickle")
		n := 1 << 20
		data := "\x80\x04" + strings.Repeat("]", n) + strings.Repeat("a", n-1) + "."
		if err := os.WriteFile(nested, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runFor(t, time.Minute, "dump-info", nested)
		if want := "nested.pickle: over the reader's memory budget at byte "; code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d:\n%s\nwant %q", code, out, want)
		}
	})
	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "dump.pickle")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := runFor(t, 30*time.Second, "dump-info", fifo)
		if code != 1 || !strings.Contains(out, "dump.pickle: not a regular file (a FIFO)") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}
