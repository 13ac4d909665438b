package summary

import (
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

// The four layout columns end the CSV: a row's own layout, an OOM row's
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
	if got := strings.Join(h[len(h)-4:], ","); got != "free_in_segments_bytes,largest_free_bytes,segments,graph_pools_bytes" {
		t.Fatalf("the header ends %s", got)
	}
	want := []string{
		"6442450944,536870912,40,4294967296",
		",,,",
		"6442450944,536870912,3,0",
	}
	for i, r := range recs[1:] {
		if got := strings.Join(r[len(r)-4:], ","); got != want[i] {
			t.Errorf("row %q ends %s, want %s", r[0], got, want[i])
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
}
