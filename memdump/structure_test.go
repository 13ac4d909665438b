package memdump

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gputop/gputop/units"
)

// structureFigures is structure.json: each dump's structure per device,
// worked out in Python from the unpickled dicts by make_structure.py.
type structureFigures map[string]map[string]struct {
	Segments      int     `json:"segments"`
	Expandable    int     `json:"expandable"`
	Blocks        int     `json:"blocks"`
	Reserved      uint64  `json:"reserved"`
	Allocated     uint64  `json:"allocated"`
	Free          uint64  `json:"free"`
	LargestFree   uint64  `json:"largest_free"`
	PendingFree   uint64  `json:"pending_free"`
	Fragmentation float64 `json:"fragmentation"`
	Pools         map[string]struct {
		Kind        string    `json:"kind"`
		ID          [2]uint64 `json:"id"`
		Type        string    `json:"type"`
		Segments    int       `json:"segments"`
		Reserved    uint64    `json:"reserved"`
		Allocated   uint64    `json:"allocated"`
		LargestFree uint64    `json:"largest_free"`
	} `json:"pools"`
}

func figures(t *testing.T) structureFigures {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "structure.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f structureFigures
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Each dump's structure is what Python makes of the same pickle: the real
// H200 dumps and pools.pickle (two devices; a default, a graph's and an
// expandable MemPool's pool; free blocks in pieces; a block waiting on
// another stream).
func TestStructureMatchesPython(t *testing.T) {
	want := figures(t)
	for _, name := range []string{"plain.pickle", "labelled.pickle", "oom.pickle", "pools.pickle"} {
		path := filepath.Join(dir, name)
		d, err := ReadFile(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Devices) != len(want[name]) {
			t.Fatalf("%s: %d devices, Python finds %d", name, len(d.Devices), len(want[name]))
		}
		sums := torchSums(t, path)
		for _, dv := range d.Devices {
			s, w := dv.Structure, want[name][fmt.Sprint(dv.Index)]
			got := [...]uint64{uint64(s.Segments), uint64(s.Expandable), uint64(s.Blocks), s.Reserved, s.Allocated,
				s.Free(), s.LargestFree, s.PendingFree}
			exp := [...]uint64{uint64(w.Segments), uint64(w.Expandable), uint64(w.Blocks), w.Reserved, w.Allocated,
				w.Free, w.LargestFree, w.PendingFree}
			if got != exp || math.Abs(s.Fragmentation()-w.Fragmentation) > 1e-12 {
				t.Errorf("%s cuda:%d: segments, expandable, blocks, reserved, allocated, free, largest free, pending "+
					"%v, fragmentation %v; Python: %v, %v", name, dv.Index, got, s.Fragmentation(), exp, w.Fragmentation)
			}
			// by other routes: the Go pickle library's sums, the walk's own blocks
			if s.Reserved != sums[dv.Index][0] || s.Allocated != sums[dv.Index][1] ||
				s.Segments != dv.Segments || s.Allocated != dv.Allocated || s.LargestFree != dv.LargestFree ||
				s.Free() != dv.Free+s.PendingFree {
				t.Errorf("%s cuda:%d: %+v disagrees with the segments' sums %v or the blocks' figures %+v",
					name, dv.Index, s, sums[dv.Index], dv)
			}
			if len(s.Pools) != len(w.Pools) {
				t.Errorf("%s cuda:%d: %d pools, Python finds %d", name, dv.Index, len(s.Pools), len(w.Pools))
			}
			for _, p := range s.Pools {
				wp, ok := w.Pools[fmt.Sprintf("(%d, %d) %s", p.ID[0], p.ID[1], p.Type)]
				if !ok || !p.HasID || p.Kind() != wp.Kind || p.Segments != wp.Segments || p.Reserved != wp.Reserved ||
					p.Allocated != wp.Allocated || p.LargestFree != wp.LargestFree {
					t.Errorf("%s cuda:%d: pool %+v (%s); Python: %+v", name, dv.Index, p, p.Kind(), wp)
				}
			}
		}
	}
}

// textOf is WriteText's output for d.
func textOf(t *testing.T, d *Dump) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, d, 0); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// newLines is the text's lines that the structure and the settings add:
// the settings block (before the first device), and each device's from
// "torch's cache" on, as far as its lines are indented by four.
func newLines(text string) []string {
	var out []string
	block := ""
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "allocator settings:"):
			block = "settings"
		case strings.HasPrefix(l, "  torch's cache: "):
			block = "cache"
		case block == "settings" && strings.HasPrefix(l, "  "), block == "cache" && strings.HasPrefix(l, "    "):
		default:
			block = ""
		}
		if block != "" {
			out = append(out, l)
		}
	}
	return out
}

// The text of pools.pickle: the structure in the words gputop uses live,
// each figure Python's; a line per pool, the default pool first; the
// settings the dump gives; no line wider than 100 columns.
func TestStructureText(t *testing.T) {
	w := figures(t)["pools.pickle"]["0"]
	d, err := ReadFile(context.Background(), filepath.Join(dir, "pools.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	text := textOf(t, d)
	b := units.Bytes
	want := []string{
		"allocator settings:\n" +
			`  PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,garbage_collection_threshold:0.6"` + "\n" +
			"  max_split_size=-1  garbage_collection_threshold=0.6  expandable_segments=True\n",
		fmt.Sprintf("\n  torch's cache: %d segments (%d expandable), %d blocks\n", w.Segments, w.Expandable, w.Blocks),
		fmt.Sprintf("\n    %s reserved, %s allocated, %s free in segments\n", b(w.Reserved), b(w.Allocated), b(w.Free)),
		fmt.Sprintf("\n    largest free block %s (fragmentation %.1f%% = 1 − largest free ÷ free in segments)\n",
			b(w.LargestFree), 100*w.Fragmentation),
		fmt.Sprintf("\n    %s of it in blocks freed but still used by another stream (active_pending_free)\n", b(w.PendingFree)),
		"\n    pool     id      type   segments    reserved   allocated  largest free\n",
		"\n    private: a CUDA graph's pool or a torch.cuda.MemPool (a dump does not say which)\n",
	}
	// the pools in order: the default ones, then the private ones, the most reserved first
	rows := ""
	for _, key := range []string{"(0, 0) large", "(0, 0) small", "(0, 1) large", "(1, 0) large"} {
		p := w.Pools[key]
		rows += fmt.Sprintf("    %-7s  %-6s  %-5s  %8d  %10s  %10s  %12s\n", p.Kind, key[:6], p.Type, p.Segments,
			b(p.Reserved), b(p.Allocated), b(p.LargestFree))
	}
	want = append(want, "largest free\n"+rows)
	for _, s := range want {
		if !strings.Contains(text, s) {
			t.Errorf("the text does not hold\n%s\n%s", s, text)
		}
	}
	if !strings.Contains(text, "roundup_power2_divisions={\"1\": 0, ") || strings.Contains(text, "cut (…)") {
		t.Errorf("roundup_power2_divisions not shown whole:\n%s", text)
	}
	// the structure comes after each device's first two lines, which are
	// as they were
	if !strings.Contains(text, fmt.Sprintf("the largest %s\n  torch's cache: ", b(w.LargestFree))) {
		t.Errorf("the structure is not after the free line:\n%s", text)
	}
	// cuda:1 has the default pool alone: said in a line, no table
	if !strings.Contains(text, "  torch's cache: 1 segment (0 expandable), 1 block, all in the default pool\n"+
		"    2.0 MiB reserved") || strings.Count(text, "    pool     id") != 1 {
		t.Errorf("cuda:1's default pool alone is not said in a line, or has a table:\n%s", text)
	}
	checkWidths(t, text)
}

// checkWidths: every line of the structure and the settings at most 100
// columns (runes: the text is made printable).
func checkWidths(t *testing.T, text string) {
	t.Helper()
	lines := newLines(text)
	if len(lines) == 0 {
		t.Errorf("no structure or settings lines in\n%s", text)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}

// The real dumps: torch 2.11's settings (expandable segments off, no
// PYTORCH_CUDA_ALLOC_CONF), the default pool only; a bare list of
// segments (memory_viz's other form) has no settings, and says so.
func TestStructureRealDumps(t *testing.T) {
	w := figures(t)["oom.pickle"]["0"]
	d, err := ReadFile(context.Background(), filepath.Join(dir, "oom.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	text := textOf(t, d)
	for _, s := range []string{
		"allocator settings: PYTORCH_CUDA_ALLOC_CONF=\"\"  max_split_size=-1  garbage_collection_threshold=0.0\n",
		"  expandable_segments=False  ",
		fmt.Sprintf("  torch's cache: %d segments (0 expandable), %d blocks\n", w.Segments, w.Blocks),
		fmt.Sprintf("    largest free block %s (fragmentation %.1f%%", units.Bytes(w.LargestFree), 100*w.Fragmentation),
	} {
		if !strings.Contains(text, s) {
			t.Errorf("oom.pickle's text does not hold %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "private") || d.Settings == nil || len(d.Settings.Entries) != 9 {
		t.Errorf("a private pool, or not torch's 9 settings (%+v):\n%s", d.Settings, text)
	}
	checkWidths(t, text)

	bare := pk.proto(pk.list(pk.dict("device", pk.int(0), "total_size", pk.int(2<<20), "blocks",
		pk.list(pk.dict("size", pk.int(2<<20), "state", pk.str("inactive"))))))
	d, err = readBytes(t, bare)
	if err != nil {
		t.Fatal(err)
	}
	text = textOf(t, d)
	s := d.Devices[0].Structure
	if d.Settings != nil || !strings.Contains(text, "allocator settings: not in this dump\n") ||
		len(s.Pools) != 1 || s.Pools[0].Kind() != "unknown" || s.LargestFree != 2<<20 || s.Fragmentation() != 0 ||
		!strings.Contains(text, "    unknown: the dump gives no segment_pool_id") {
		t.Errorf("a bare list of segments: %+v\n%s", s, text)
	}
}

// pk writes pickles (protocol 4) of dicts, lists, tuples, strings and
// integers, as torch's would hold them; each returns the opcodes of one
// value.
var pk pickler

type pickler struct{}

func (pickler) proto(v string) []byte { return []byte("\x80\x04" + v + ".") }

func (pickler) str(s string) string {
	if len(s) < 256 {
		return "\x8c" + string([]byte{byte(len(s))}) + s
	}
	return "X" + le(4, uint64(len(s))) + s
}

// int is n as BININT (4 bytes, signed) or, past it, an 8-byte LONG1.
func (pickler) int(n int64) string {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return "J" + le(4, uint64(uint32(int32(n))))
	}
	return "\x8a\x08" + le(8, uint64(n))
}

// uint is n as a 9-byte LONG1: non-negative past 2^63 too.
func (pickler) uint(n uint64) string { return "\x8a\x09" + le(8, n) + "\x00" }

// dict is a dict of keys (written as strings) and values (opcodes), in turn.
func (p pickler) dict(kv ...string) string {
	s := "}("
	for i := 0; i+1 < len(kv); i += 2 {
		s += p.str(kv[i]) + kv[i+1]
	}
	return s + "u"
}

func (pickler) list(items ...string) string  { return "](" + strings.Join(items, "") + "e" }
func (pickler) tuple(items ...string) string { return "(" + strings.Join(items, "") + "t" }

// seg is a segment dict with the given extra fields (key, value
// opcodes) and one inactive block of 1 MiB.
func seg(extra ...string) string {
	kv := append([]string{"device", pk.int(0), "total_size", pk.int(2 << 20),
		"blocks", pk.list(pk.dict("size", pk.int(1<<20), "state", pk.str("inactive")))}, extra...)
	return pk.dict(kv...)
}

func snap(segments ...string) []byte { return pk.proto(pk.dict("segments", pk.list(segments...))) }

// What a segment says of its pool, type and expandability must be of
// the types torch writes: anything else is an error naming the segment
// and the field, as for its sizes.
func TestStructureRefusesWrongTypes(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"pool id a string", snap(seg(), seg("segment_pool_id", pk.str("(0, 0)"))),
			`segment 1: "segment_pool_id" is a string, not a pair of non-negative integers`},
		{"pool id an integer", snap(seg("segment_pool_id", pk.int(3))),
			`segment 0: "segment_pool_id" is an integer, not a pair of non-negative integers`},
		{"pool id of three", snap(seg("segment_pool_id", pk.tuple(pk.int(0), pk.int(0), pk.int(1)))),
			`segment 0: "segment_pool_id" has 3 elements, not a pair of non-negative integers`},
		{"pool id negative", snap(seg("segment_pool_id", pk.tuple(pk.int(-1), pk.int(0)))),
			`segment 0: "segment_pool_id"[0] is -1, not a non-negative integer below 2^64`},
		{"pool id past 2^64", snap(seg("segment_pool_id", pk.list(pk.int(0), "\x8a\x09"+le(8, 0)+"\x01"))),
			`segment 0: "segment_pool_id"[1] is 18446744073709551616, not a non-negative integer below 2^64`},
		{"pool id of strings", snap(seg("segment_pool_id", pk.tuple(pk.str("a"), pk.int(0)))),
			`segment 0: "segment_pool_id"[0] is a string, not a non-negative integer below 2^64`},
		{"pool id of bools", snap(seg("segment_pool_id", pk.tuple("\x88", pk.int(0)))),
			`segment 0: "segment_pool_id"[0] is a bool, not a non-negative integer below 2^64`},
		{"segment type an integer", snap(seg("segment_type", pk.int(1))),
			`segment 0: "segment_type" is an integer, not a string`},
		{"expandable a string", snap(seg("is_expandable", pk.str("True"))),
			`segment 0: "is_expandable" is a string, not a bool`},
		{"allocated negative", snap(seg("allocated_size", pk.int(-5))),
			`segment 0: "allocated_size" is an integer, not a non-negative integer`},
		{"total negative", snap(pk.dict("device", pk.int(0), "total_size", pk.int(-1))),
			`segment 0: "total_size" is an integer, not a non-negative integer`},
		{"settings a list", pk.proto(pk.dict("segments", pk.list(seg()), "allocator_settings", pk.list())),
			`"allocator_settings" is a list, not a dict`},
	} {
		_, err := readBytes(t, c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dump.pickle: ") {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// Sizes that no device has: sums held at 2^64-1 and said, not wrapped
// round to small figures; allocated past reserved leaves nothing free.
func TestStructureHugeSizes(t *testing.T) {
	huge := pk.uint(math.MaxUint64)
	d, err := readBytes(t, snap(
		pk.dict("device", pk.int(0), "total_size", huge, "allocated_size", huge, "segment_pool_id",
			pk.tuple(huge, huge), "segment_type", pk.str(strings.Repeat("\x1b[2J", 30)),
			"blocks", pk.list(pk.dict("size", huge, "state", pk.str("inactive")))),
		pk.dict("device", pk.int(0), "total_size", huge, "allocated_size", pk.int(1), "blocks", pk.list()),
		pk.dict("device", pk.int(1), "total_size", pk.int(1<<20), "allocated_size", pk.int(2<<20), "blocks", pk.list()),
	))
	if err != nil {
		t.Fatal(err)
	}
	s := d.Devices[0].Structure
	if !s.Saturated || s.Reserved != math.MaxUint64 || s.Allocated != math.MaxUint64 || d.Devices[0].Reserved != math.MaxUint64 ||
		s.LargestFree != math.MaxUint64 || s.Fragmentation() != 0 {
		t.Errorf("cuda:0: %+v; want the sums held at 2^64-1, and said", s)
	}
	if s1 := d.Devices[1].Structure; s1.Free() != 0 || s1.Fragmentation() != 0 || s1.Saturated {
		t.Errorf("cuda:1, allocated past reserved: free %d, fragmentation %v", s1.Free(), s1.Fragmentation())
	}
	text := textOf(t, d)
	if !strings.Contains(text, "    sizes summed past 2^64 bytes, held there") || strings.ContainsRune(text, 0x1b) ||
		!strings.Contains(text, "(18446744073709551615, 1…") {
		t.Errorf("the text does not say the sums were held, shows an escape or the whole id:\n%s", text)
	}
}

// A dump's settings are outside input: keys past the first 32 are
// counted, not shown; keys and values are cut, made printable and
// wrapped to 100 columns; a value nested deep costs what is written.
func TestSettingsBounded(t *testing.T) {
	kv := []string{"PYTORCH_CUDA_ALLOC_CONF", pk.str("expandable_segments:True\x1b]0;pwned\x07" + strings.Repeat(",x:1", 5000)),
		strings.Repeat("k", 100) + "\x1b[31m", pk.str("red"),
		"nested", strings.Repeat("](", 10000) + strings.Repeat("e", 10000),
		"threshold", "G" + string([]byte{0x3f, 0xe3, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33}), // 0.6
		"floats", pk.list("G\x7f\xf0\x00\x00\x00\x00\x00\x00", "G\x00\x00\x00\x00\x00\x00\x00\x00", "N", "\x89"),
	}
	for i := range 995 {
		kv = append(kv, fmt.Sprintf("key%d", i), pk.int(int64(i)))
	}
	d, err := readBytes(t, pk.proto(pk.dict("segments", pk.list(seg()), "allocator_settings", pk.dict(kv...))))
	if err != nil {
		t.Fatal(err)
	}
	st := d.Settings
	if st == nil || len(st.Entries) != maxSettings || st.More != 1000-maxSettings {
		t.Fatalf("settings %+v; want the first %d of 1000 kept", st, maxSettings)
	}
	for i, want := range []string{"", "", "[[[[", "0.6", "[inf, 0.0, None, False]"} {
		if e := st.Entries[i]; !strings.HasPrefix(e.Value, want) || len(e.Key) > maxSettingKey+len("…") ||
			len(e.Value) > maxSettingValue+len("…") {
			t.Errorf("setting %d: %q = %q; want a value starting %q, cut to %d", i, e.Key, e.Value, want, maxSettingValue)
		}
	}
	text := textOf(t, d)
	for _, want := range []string{
		"  (968 more not shown; 3 cut (…): keys to 40 bytes, values to 256)\n",
		`PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True\x1b]0;pwned\a,x:1,x:1`,
		"  threshold=0.6\n", "\n  floats=[inf, 0.0, None, False]  key0=0  key1=1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text does not hold %q:\n%s", want, text)
		}
	}
	if strings.ContainsAny(text, "\x1b\x07") || !strings.Contains(text, "kkkk…=\"red\"") {
		t.Errorf("an escape reached the text, or the long key is not cut:\n%s", text)
	}
	checkWidths(t, text)
}

// More pools than a device's lines show: the first 8 listed, the rest
// summed in a line.
func TestPoolsBeyondTheLines(t *testing.T) {
	var segs []string
	for i := range 20 {
		segs = append(segs, seg("segment_pool_id", pk.tuple(pk.int(0), pk.int(int64(i))), "segment_type", pk.str("large"),
			"allocated_size", pk.int(int64(i)<<10)))
	}
	d, err := readBytes(t, snap(segs...))
	if err != nil {
		t.Fatal(err)
	}
	s := d.Devices[0].Structure
	if len(s.Pools) != 20 || s.Pools[0].Kind() != "default" || s.Pools[1].ID != [2]uint64{0, 1} {
		t.Fatalf("pools %+v; want 20, the default first, then by id (all reserve the same)", s.Pools)
	}
	var rest uint64
	for _, p := range s.Pools[maxPoolLines:] {
		rest += p.Allocated
	}
	text := textOf(t, d)
	if want := fmt.Sprintf("    (12 more pools: 12 segments, 24.0 MiB reserved, %s allocated)\n", units.Bytes(rest)); !strings.Contains(text, want) ||
		strings.Count(text, "\n    private  (0, ") != maxPoolLines-1 {
		t.Errorf("the text does not list 8 pools and sum the rest as %q:\n%s", want, text)
	}
	checkWidths(t, text)
}

// blockList is n blocks: the list (memo 0), an inactive block of 1 byte
// (memo 1) and an allocated one of 2 (memo 2), then references to them in
// turn (LONG_BINGET: a 5-byte reference is what gopickle's decoding is
// budgeted for; a 2-byte one would pass the memory budget first).
func blockList(n int) string {
	var b strings.Builder
	b.WriteString("]\x94(" + pk.dict("size", pk.int(1), "state", pk.str("inactive")) + "\x94" +
		pk.dict("size", pk.int(2), "state", pk.str("active_allocated")) + "\x94")
	for i := 2; i < n; i++ {
		b.WriteString("j" + le(4, uint64(1+i%2)))
	}
	b.WriteString("e")
	return b.String()
}

// 1,000,000 blocks are read within the budgets, every one counted; a
// list of 10,000 referred to by 10,000 segments (100,000,000 blocks in
// 0.3 MB) is refused at the visit budget, not walked.
func TestStructureMillionBlocks(t *testing.T) {
	const n = 1_000_000
	data := snap(pk.dict("device", pk.int(0), "total_size", pk.int(3*n/2), "blocks", blockList(n)))
	var c cost
	d, err := read(context.Background(), bytes.NewReader(data), "million.pickle", int64(len(data)), &c)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Devices[0].Structure
	if s.Blocks != n || s.Allocated != n || s.Free() != n/2 || s.LargestFree != 1 || c.visits > visitLimit(int64(len(data))) {
		t.Errorf("%d blocks, allocated %d, free %d, largest %d, %d visits of %d; want %d blocks, %d allocated, %d free in ones",
			s.Blocks, s.Allocated, s.Free(), s.LargestFree, c.visits, visitLimit(int64(len(data))), n, n, n/2)
	}

	segs := []string{pk.dict("device", pk.int(0), "total_size", pk.int(1), "blocks", blockList(10_000))}
	for range 10_000 - 1 {
		segs = append(segs, pk.dict("device", pk.int(0), "total_size", pk.int(1), "blocks", "h\x00"))
	}
	data = snap(segs...)
	c = cost{}
	_, err = read(context.Background(), bytes.NewReader(data), "shared.pickle", int64(len(data)), &c)
	var be *BudgetError
	// the visit that passes the limit is a dict's entries: at most 2 past it
	if !errors.As(err, &be) || be.Budget != "visits" || c.visits > be.Limit+2 {
		t.Errorf("10,000 segments of one list of 10,000 blocks: %v after %d visits; want the visit budget", err, c.visits)
	}
}
