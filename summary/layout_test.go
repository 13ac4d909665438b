package summary

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

const gib = 1 << 30

// fragmented is a layout of 6 GiB free in torch's cache whose largest
// free block is 512 MiB, with a CUDA graph's private pool, read with
// torch's settings (expandable_segments not in force).
func fragmented(t int64) *wire.Layout {
	no := false
	return &wire.Layout{T: t, Segments: 40, Blocks: 900, Reserved: 70 * gib, Allocated: 64 * gib,
		FreeInSegments: 6 * gib, LargestFree: 512 * mib,
		Pools: []wire.Pool{
			{Kind: wire.PoolDefault, ID: "0,0", Segments: 38, Reserved: 66 * gib, Allocated: 61 * gib, LargestFree: 512 * mib},
			{Kind: wire.PoolGraph, ID: "1,2", Segments: 2, Reserved: 4 * gib, Allocated: 3 * gib, LargestFree: 256 * mib},
		},
		Settings: &wire.AllocSettings{From: "torch", Expandable: &no,
			Items: []wire.Setting{{Name: "max_split_size_mb", Value: "512"}, {Name: "garbage_collection_threshold", Value: "0.8"}}}}
}

// The four layout columns (after dump): a row's own layout, an OOM row's
// from its frame, and empty cells on a row without one.
func TestCSVLayoutColumns(t *testing.T) {
	const t0 = 1e18
	devs := []store.Device{{Index: 0, Name: "NVIDIA H200"}}
	al, re := uint64(64*gib), uint64(70*gib)
	oom := wire.OOM{PID: 42, T: t0 + 2e9, Requested: 800 * mib, Allocated: al, Reserved: re,
		Layout: &wire.Layout{T: t0 + 2e9, Segments: 3, Reserved: re, Allocated: al, FreeInSegments: 6 * gib, LargestFree: 512 * mib}}
	rows := []wire.Row{
		{T: t0, Label: "step", Dev: 0, PID: 42, Source: "agent", Allocated: &al, Reserved: &re, Layout: fragmented(t0)},
		{T: t0 + 1e9, Label: "no layout", Dev: 0, PID: 42, Source: "agent", Allocated: &al, Reserved: &re},
		wire.OOMRow(oom, 0),
	}
	recs := Records(rows, devs)
	h := recs[0]
	at := slices.Index(h, "free_in_segments_bytes")
	if got := strings.Join(h[max(at, 0):min(at+4, len(h))], ","); at < 0 || got != "free_in_segments_bytes,largest_free_bytes,segments,graph_pools_bytes" {
		t.Fatalf("the header has %s", got)
	}
	want := []string{
		"6442450944,536870912,40,4294967296",
		",,,",
		"6442450944,536870912,3,0",
	}
	for i, r := range recs[1:] {
		if got := strings.Join(r[at:at+4], ","); got != want[i] {
			t.Errorf("row %q has %s, want %s", r[0], got, want[i])
		}
	}
}

// A row's layout in words: the measured figures, the pools with their
// bytes, the settings in force and where they come from, and how old
// the reading is when it is older than LayoutOld.
func TestRowLayoutText(t *testing.T) {
	const t0 = 1e18
	r := wire.Row{T: t0, Layout: fragmented(t0 - 1e9)}
	want := "torch's cache at this row: 6.00 GiB free in segments, largest free block 512.0 MiB, fragmentation 91.7%; " +
		"pools: default 66.00 GiB, graph 1,2 4.00 GiB; " +
		"settings in force (torch's): expandable_segments:False, max_split_size_mb:512, garbage_collection_threshold:0.8"
	if got := RowLayoutText(r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	r.Layout.T = t0 - 12_340_000_000
	if got := RowLayoutText(r); !strings.HasSuffix(got, "; read 12.3s before the row") {
		t.Errorf("an old reading should say when it was read: %s", got)
	}
	if got := RowLayoutText(wire.Row{T: t0}); got != "" {
		t.Errorf("a row without a layout: %q", got)
	}
	l := fragmented(t0)
	l.Pools, l.Settings = l.Pools[:1], &wire.AllocSettings{From: "env", Env: "PYTORCH_CUDA_ALLOC_CONF", Conf: "expandable_segments:True"}
	want = "6.00 GiB free in segments, largest free block 512.0 MiB, fragmentation 91.7%; all in the default pool; " +
		"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True asked for (torch did not say whether in force)"
	if got := LayoutText(*l, t0, "the cursor"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	l.Settings = nil
	l.Pools = nil
	for i := range 7 {
		l.Pools = append(l.Pools, wire.Pool{Kind: wire.PoolPrivate, ID: strings.Repeat("9", 60) + string(rune('a'+i)), Reserved: gib})
	}
	l.PoolsCut = 3
	got := LayoutText(*l, t0, "the cursor")
	if !strings.Contains(got, "private "+strings.Repeat("9", 39)+"… 1.00 GiB") || !strings.Contains(got, "(+6 more)") ||
		!strings.HasSuffix(got, "; allocator settings not known") {
		t.Errorf("pools past the first four, long ids and no settings:\n%s", got)
	}
	// settings past the first six: counted; a long value: cut
	st := &wire.AllocSettings{From: "torch"}
	for i := range 9 {
		st.Items = append(st.Items, wire.Setting{Name: fmt.Sprintf("s%d", i), Value: strings.Repeat("v", 100)})
	}
	got = SettingsText(st)
	if want := "settings in force (torch's): s0:" + strings.Repeat("v", 39) + "…, s1:"; !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, ", s5:"+strings.Repeat("v", 39)+"… (+3 more)") {
		t.Errorf("nine long settings:\n%s", got)
	}
}

// An OOM with the layout read at it is explained from that layout: the
// measured figures first, then gputop's suggestion, for a fragmented
// cache (as torch's settings, the environment or nothing say of
// expandable_segments), a cache with too little free (live tensors, or
// another process), and a request the largest free block would have
// taken; without a layout, the counters' explanation as before.
func TestExplainOOMWithLayout(t *testing.T) {
	const total = 140 * gib
	used := uint64(72 * gib)
	row := Row{Row: wire.Row{NVMLUsed: &used}}
	base := wire.OOM{Requested: 800 * mib, Free: 300 * mib, Allocated: 64 * gib, Reserved: 70 * gib}
	yes := true
	for _, c := range []struct {
		name         string
		layout       func(l *wire.Layout)
		used         uint64
		requested    uint64
		cause, fix   string
		noFix        bool
		counterCause string
	}{
		{name: "fragmentation, torch's settings", layout: func(*wire.Layout) {},
			cause: "Measured at the OOM: 6.00 GiB free in torch's cache but its largest free block is 512.0 MiB, less than the 800.0 MiB asked: fragmentation (91.7% = 1 − largest free block ÷ free in the cache).",
			fix:   "Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not in force) lets such requests reuse the space."},
		{name: "fragmentation, no settings", layout: func(l *wire.Layout) { l.Settings = nil },
			fix: "Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not known: the reading gave no settings) lets such requests reuse the space."},
		{name: "fragmentation, the environment's", layout: func(l *wire.Layout) {
			l.Settings = &wire.AllocSettings{From: "env", Env: "PYTORCH_ALLOC_CONF", Conf: "expandable_segments:True"}
		},
			fix: "Suggestion: PYTORCH_ALLOC_CONF=expandable_segments:True (asked for in PYTORCH_ALLOC_CONF; whether in force not known) lets such requests reuse the space."},
		{name: "fragmentation, expandable in force", layout: func(l *wire.Layout) { l.Settings.Expandable = &yes },
			fix: "Suggestion: expandable_segments is in force already (torch's settings), so only smaller requests, or fewer live tensors between the large ones, leave a block this large."},
		{name: "live tensors", requested: 8 * gib, layout: func(*wire.Layout) {},
			cause: "Measured at the OOM: 6.00 GiB free in torch's cache (largest free block 512.0 MiB), less than the 8.00 GiB asked, with 64.00 GiB in live blocks of the 70.00 GiB it reserved. Live tensors fill the GPU.",
			fix:   "Suggestion: holders (h in gputop, gputop.holders() in Python) names what keeps them, or use a smaller batch."},
		{name: "another process", requested: 8 * gib, used: 139 * gib, layout: func(*wire.Layout) {},
			cause: "Measured at the OOM: 6.00 GiB free in torch's cache (largest free block 512.0 MiB), less than the 8.00 GiB asked, with 64.00 GiB in live blocks of the 70.00 GiB it reserved. More is used outside this process's tensors than by them: other processes or the CUDA context.",
			fix:   "Suggestion: NVML's process list (the process pane) names who else holds the GPU."},
		{name: "the largest block would have taken it", requested: 256 * mib, layout: func(*wire.Layout) {},
			cause: "Measured at the OOM: 6.00 GiB free in torch's cache, largest free block 512.0 MiB. Live tensors fill the GPU: holders (h in gputop, gputop.holders() in Python) names what keeps them, or use a smaller batch.",
			noFix: true},
		{name: "no layout", requested: 512 * mib,
			cause: "The cache had room but no free block that large: fragmentation. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids it.",
			noFix: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := base
			if c.requested > 0 {
				o.Requested = c.requested
			}
			if c.layout != nil {
				o.Layout = fragmented(0)
				c.layout(o.Layout)
			}
			r := row
			if c.used > 0 {
				r.NVMLUsed = &c.used
			}
			e := ExplainOOM(r, o, total)
			if c.cause != "" && e.Cause != c.cause {
				t.Errorf("cause\n%s\nwant\n%s", e.Cause, c.cause)
			}
			if c.fix != "" && e.Fix != c.fix {
				t.Errorf("fix\n%s\nwant\n%s", e.Fix, c.fix)
			}
			if c.noFix && e.Fix != "" {
				t.Errorf("a suggestion where none was wanted: %s", e.Fix)
			}
			if want := e.Cause + " " + e.Fix + " " + e.Where; e.Fix != "" && e.Text() != want {
				t.Errorf("text %q", e.Text())
			}
		})
	}
}

// `gputop export`'s findings give an end row's and an OOM's layout under
// them.
func TestFindingsWithLayout(t *testing.T) {
	st := store.New(store.DefaultOptions())
	st.SetDevice(store.Device{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", Total: 140 * gib})
	st.AgentHello(wire.Hello{PID: 9, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-0"}}})
	st.AgentOOM(9, wire.OOM{T: 200, Dev: 0, Requested: 800 * mib, Free: 1 * mib, Allocated: 64 * gib, Reserved: 70 * gib, Layout: fragmented(200)})
	st.AddRow(wire.Row{T: 300, Label: "After cleanup", Dev: 0, PID: 9, Source: "agent", End: true,
		Allocated: new(uint64), Reserved: new(uint64), Peak: new(uint64), Layout: &wire.Layout{T: 300}})
	got := strings.Join(Findings(st.Rows(), st.Devices()), "\n")
	for _, want := range []string{
		"GPU 0 (NVIDIA H200), pid 9: ✓ After cleanup: nothing of yours holds CUDA memory (0 B allocated) [torch's counters]\n" +
			`  vs "OOM": -65536.00 MiB allocated (torch)` + "\n" +
			"  torch's cache at this row: 0 B free in segments, largest free block 0 B, fragmentation 0.0%; allocator settings not known\n",
		"GPU 0 (NVIDIA H200): ✗ OOM at " + TimeString(200) + " in pid 9: asked for 800.0 MiB, 1.0 MiB free on the GPU (CUDA).\n" +
			"  Measured at the OOM: 6.00 GiB free in torch's cache but its largest free block is 512.0 MiB, less than the 800.0 MiB asked: fragmentation (91.7% = 1 − largest free block ÷ free in the cache). " +
			"Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not in force) lets such requests reuse the space. " +
			"torch held 64.00 GiB in tensors (allocated) and 6.00 GiB cached but unused (reserved − allocated).\n" +
			"  torch's cache at the OOM: 6.00 GiB free in segments, largest free block 512.0 MiB, fragmentation 91.7%; pools: default 66.00 GiB, graph 1,2 4.00 GiB; " +
			"settings in force (torch's): expandable_segments:False, max_split_size_mb:512, garbage_collection_threshold:0.8",
	} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("findings\n%s\nlack\n%s", got, want)
		}
	}
}
