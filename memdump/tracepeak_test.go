package memdump

import (
	"strings"
	"testing"
)

// frames is a stack as torch records it, innermost first: a frame of
// torch's own, then the user's line.
func frames(line int64) string {
	return pk.list(
		pk.dict("filename", pk.str("/usr/lib/python3/site-packages/torch/nn/modules/linear.py"), "name", pk.str("forward"), "line", pk.int(125)),
		pk.dict("filename", pk.str("/home/u/train.py"), "name", pk.str("step"), "line", pk.int(line)))
}

func traceEntry(action string, addr, size, us int64, line int64, label string) string {
	kv := []string{"action", pk.str(action), "addr", pk.int(addr), "size", pk.int(size), "time_us", pk.int(us),
		"user_metadata", pk.str(label)}
	if action == "alloc" {
		kv = append(kv, "frames", frames(line))
	} else {
		kv = append(kv, "frames", pk.list())
	}
	return pk.dict(kv...)
}

func block(addr, size int64, state string, line int64) string {
	kv := []string{"address", pk.int(addr), "size", pk.int(size), "requested_size", pk.int(size), "state", pk.str(state)}
	if state == "active_allocated" {
		kv = append(kv, "frames", frames(line))
	}
	return pk.dict(kv...)
}

// A dump whose trace rose and fell: at the dump only the weights (line 10,
// allocated before the trace's start) and a batch (line 20) are live; in
// the trace, activations (line 30, two blocks of 4 MiB) and a temporary
// (line 40, 8 MiB, allocated before the trace's first entry: no frame
// known) were live together with them at its highest point, 16 MiB over
// the dump's 6 MiB, after the second activation's alloc under "step 7".
// dump-info names those lines with their bytes and blocks at that point.
func TestTracePeakBlocksByLine(t *testing.T) {
	const mib = 1 << 20
	seg := pk.dict("device", pk.int(0), "total_size", pk.int(32*mib), "allocated_size", pk.int(6*mib),
		"blocks", pk.list(
			block(0x1000_0000, 4*mib, "active_allocated", 10),
			block(0x1040_0000, 2*mib, "active_allocated", 20),
			block(0x1060_0000, 26*mib, "inactive", 0)))
	trace := pk.list(
		traceEntry("alloc", 0x1040_0000, 2*mib, 100, 20, "step 7"),
		traceEntry("alloc", 0x1100_0000, 4*mib, 200, 30, "step 7"),
		traceEntry("alloc", 0x1140_0000, 4*mib, 300, 30, "step 7"),
		traceEntry("free_completed", 0x1200_0000, 8*mib, 400, 0, "step 7"),
		traceEntry("free_completed", 0x1100_0000, 4*mib, 500, 0, "step 7"),
		traceEntry("free_completed", 0x1140_0000, 4*mib, 600, 0, "step 7"))
	data := pk.proto(pk.dict("segments", pk.list(seg), "device_traces", pk.list(trace)))
	d, err := readBytes(t, data)
	if err != nil {
		t.Fatal(err)
	}
	tp := d.Devices[0].TracePeak
	if tp == nil || tp.Now || tp.AtStart || tp.Allocated != 22*mib || tp.TimeUS != 300 || tp.Label != "step 7" || tp.Unknown != 8*mib {
		t.Fatalf("trace peak %+v, want 22 MiB after the entry at 300 us, 8 MiB of it unknown", tp)
	}
	want := []struct {
		line   int
		bytes  uint64
		blocks int
	}{{30, 8 * mib, 2}, {10, 4 * mib, 1}, {20, 2 * mib, 1}}
	if len(tp.Live) != len(want) {
		t.Fatalf("live at the peak %+v, want %d lines", tp.Live, len(want))
	}
	for i, w := range want {
		g := tp.Live[i]
		if g.Frame.File != "/home/u/train.py" || g.Frame.Line != w.line || g.Bytes != w.bytes || g.Blocks != w.blocks {
			t.Errorf("group %d: %+v, want train.py:%d with %d bytes in %d blocks", i, g, w.line, w.bytes, w.blocks)
		}
	}
	var b strings.Builder
	if err := WriteText(&b, d, 8); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, s := range []string{
		`the trace's highest point: 22.0 MiB allocated, 0.000 s before the trace's last entry (under "step 7")`,
		"8.0 MiB       2  /home/u/train.py:30 step",
		"8.0 MiB          (allocated before the trace's first entry and freed since: no frame known)",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("dump-info lacks %q:\n%s", s, text)
		}
	}

	// a trace that never rose above the dump: its highest point is the dump
	flat := pk.list(traceEntry("alloc", 0x1040_0000, 2*mib, 100, 20, ""))
	d, err = readBytes(t, pk.proto(pk.dict("segments", pk.list(seg), "device_traces", pk.list(flat))))
	if err != nil {
		t.Fatal(err)
	}
	if tp := d.Devices[0].TracePeak; tp == nil || !tp.Now || tp.Allocated != 6*mib {
		t.Errorf("a trace that only rose to the dump: %+v, want the dump's own moment at 6 MiB", tp)
	}
}
