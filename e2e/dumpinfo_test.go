package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gputop/gputop/units"
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

// gputop dump-info shows torch's cache as gputop shows it live: per
// device the segments, reserved, allocated, free in segments, the largest
// free block and the fragmentation, a line per pool, and the allocator's
// settings; each figure as make_structure.py worked it out in Python
// (structure.json), on the generated two-device dump with private pools
// and on a real H200 dump. A segment_pool_id of the wrong type exits 1
// naming the segment.
func TestDumpInfoStructure(t *testing.T) {
	dumps := filepath.Join("..", "testdata", "memdump")
	raw, err := os.ReadFile(filepath.Join(dumps, "structure.json"))
	if err != nil {
		t.Fatal(err)
	}
	var figures map[string]map[string]struct {
		Segments, Expandable, Blocks int
		Reserved, Allocated, Free    uint64
		LargestFree                  uint64 `json:"largest_free"`
		PendingFree                  uint64 `json:"pending_free"`
		Fragmentation                float64
		Pools                        map[string]struct {
			Kind                string
			Type                string
			Segments            int
			Reserved, Allocated uint64
			LargestFree         uint64 `json:"largest_free"`
		}
	}
	if err := json.Unmarshal(raw, &figures); err != nil {
		t.Fatal(err)
	}
	b := units.Bytes
	for _, name := range []string{"pools.pickle", "oom.pickle"} {
		out, code := run(t, "dump-info", filepath.Join(dumps, name))
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s", name, code, out)
		}
		for dev, w := range figures[name] {
			want := []string{
				fmt.Sprintf("cuda:%s: reserved %s in %d segment", dev, b(w.Reserved), w.Segments),
				fmt.Sprintf("  torch's cache: %d segment", w.Segments),
				fmt.Sprintf(" (%d expandable), %d block", w.Expandable, w.Blocks),
				fmt.Sprintf("    %s reserved, %s allocated, %s free in segments\n", b(w.Reserved), b(w.Allocated), b(w.Free)),
				fmt.Sprintf("    largest free block %s (fragmentation %.1f%% = 1 − largest free ÷ free in segments)\n",
					b(w.LargestFree), 100*w.Fragmentation),
			}
			if len(w.Pools) == 1 {
				// the default pool alone: its line would be the totals
				want = append(want, fmt.Sprintf(", %d block%s, all in the default pool\n", w.Blocks, map[bool]string{true: "s"}[w.Blocks != 1]))
				w.Pools = nil
			} else {
				want = append(want, "    pool     id      type   segments    reserved   allocated  largest free\n")
			}
			for key, p := range w.Pools {
				want = append(want, fmt.Sprintf("    %-7s  %-6s  %-5s  %8d  %10s  %10s  %12s\n", p.Kind, key[:6], p.Type,
					p.Segments, b(p.Reserved), b(p.Allocated), b(p.LargestFree)))
			}
			for _, s := range want {
				if !strings.Contains(out, s) {
					t.Errorf("%s cuda:%s: the output does not hold %q:\n%s", name, dev, s, out)
				}
			}
		}
		in := false
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "allocator settings:") || strings.HasPrefix(l, "  torch's cache:") {
				in = true
			} else if !strings.HasPrefix(l, "    ") && !(strings.HasPrefix(l, "  ") && strings.Contains(l, "=")) {
				in = false
			}
			if in && utf8.RuneCountInString(l) > 100 {
				t.Errorf("%s: a line of %d columns: %q", name, utf8.RuneCountInString(l), l)
			}
		}
	}
	out, _ := run(t, "dump-info", filepath.Join(dumps, "pools.pickle"))
	for _, s := range []string{
		"allocator settings:\n  PYTORCH_CUDA_ALLOC_CONF=\"expandable_segments:True,garbage_collection_threshold:0.6\"\n",
		"  max_split_size=-1  garbage_collection_threshold=0.6  expandable_segments=True\n",
		"    1.0 MiB of it in blocks freed but still used by another stream (active_pending_free)\n",
		"    private: a CUDA graph's pool or a torch.cuda.MemPool (a dump does not say which)\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("pools.pickle: the output does not hold %q:\n%s", s, out)
		}
	}
	out, _ = run(t, "dump-info", filepath.Join(dumps, "oom.pickle"))
	if !strings.Contains(out, "allocator settings: PYTORCH_CUDA_ALLOC_CONF=\"\"  max_split_size=-1  ") ||
		!strings.Contains(out, "  expandable_segments=False  ") || strings.Contains(out, "private") {
		t.Errorf("oom.pickle: torch 2.11's settings or the default pool alone not shown:\n%s", out)
	}

	bad := filepath.Join(t.TempDir(), "bad-pool.pickle")
	data := "\x80\x04}(\x8c\x08segments](}(\x8c\x06deviceK\x00\x8c\x0atotal_sizeK\x09" +
		"\x8c\x0fsegment_pool_id\x8c\x06(0, 0)ue" + "u."
	if err := os.WriteFile(bad, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "dump-info", bad)
	if want := `bad-pool.pickle: segment 0: "segment_pool_id" is a string, not a pair of non-negative integers`; code != 1 || !strings.Contains(out, want) {
		t.Errorf("a segment_pool_id of the wrong type: exit %d:\n%s\nwant %q", code, out, want)
	}
}

// A recording given to dump-info is named as such, with the commands that
// read it, not reported as a bad pickle.
func TestDumpInfoRecording(t *testing.T) {
	rec := filepath.Join("..", "testdata", "recordings", "edits-v3.gputop")
	out, code := run(t, "dump-info", rec)
	if code != 1 || !strings.Contains(out, rec+" is a gputop recording, not a torch memory dump: gputop --replay "+rec) {
		t.Errorf("exit %d, want 1 and the file named a recording:\n%s", code, out)
	}
}

// gputop dump-info on a real H200 dump with a trace (make_dumps.py's
// training loop, 2000 entries): besides the blocks live at the dump, the
// trace replayed backwards gives its highest point above the dump's
// allocated and the lines whose blocks were live there: after the blocks
// allocated before history was on, the leaking loss line
// (make_dumps.py:45) with one block more than at the dump.
func TestDumpInfoTracePeak(t *testing.T) {
	out, code := run(t, "dump-info", filepath.Join("..", "testdata", "memdump", "labelled.pickle"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	_, after, ok := strings.Cut(out, "the trace's highest point: ")
	if !ok {
		t.Fatalf("dump-info gives no trace peak:\n%s", out)
	}
	lines := strings.Split(after, "\n")
	if !strings.HasPrefix(lines[0], "69.0 MiB allocated, ") || len(lines) < 4 ||
		!strings.Contains(lines[3], "make_dumps.py:45 <module>") || !strings.Contains(lines[3], "  33.5 MiB      63  ") {
		t.Errorf("the trace's peak: want 69.0 MiB over the dump's 67.5 MiB, make_dumps.py:45's 63 blocks second:\n%s", out)
	}
}
