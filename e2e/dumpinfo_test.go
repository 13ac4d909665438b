package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
