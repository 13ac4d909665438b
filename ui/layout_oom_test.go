package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// fragmentedOOM gives the fixture's training process an OOM at 85 s whose
// layout, read at it, has 6 GiB free in torch's cache in blocks of at most
// 512 MiB (a CUDA graph's pool among its pools), and torch's settings
// without expandable_segments.
func fragmentedOOM(st *store.Store) {
	no := false
	t := at(85 * time.Second)
	st.AgentOOM(fixPID, wire.OOM{Type: wire.TypeOOM, T: t, Dev: 0, Requested: 800 * mib, Free: 300 * mib,
		Allocated: 64 * gib, Reserved: 70 * gib, Peak: 66 * gib,
		Layout: &wire.Layout{T: t, Segments: 40, Blocks: 900, Reserved: 70 * gib, Allocated: 64 * gib,
			FreeInSegments: 6 * gib, LargestFree: 512 * mib,
			Pools: []wire.Pool{
				{Kind: wire.PoolDefault, ID: "0,0", Segments: 38, Reserved: 66 * gib, Allocated: 61 * gib, LargestFree: 512 * mib},
				{Kind: wire.PoolGraph, ID: "1,2", Segments: 2, Reserved: 4 * gib, Allocated: 3 * gib, LargestFree: 256 * mib},
			},
			Settings: &wire.AllocSettings{From: "torch", Expandable: &no, Items: []wire.Setting{{Name: "max_split_size_mb", Value: "512"}}}}})
}

// An OOM of fragmentation is explained from the layout read at it, the
// measured figures and then the suggestion, whole at every size (at
// 80x24 too, wrapped); the OOM row selected, its details give torch's
// cache at the row with its pools and settings.
func TestOOMOfFragmentationExplained(t *testing.T) {
	st := newFixture()
	fragmentedOOM(st)
	measured := "Measured at the OOM: 6.00 GiB free in torch's cache but its largest free block is 512.0 MiB, less than the 800.0 MiB asked: fragmentation (91.7% = 1 − largest free block ÷ free in the cache)."
	fix := "Suggestion: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (not in force) lets such requests reuse the space."
	short := "✗ OOM at 0:01:25.0 in pid 4242: asked 800.0 MiB; 6.00 GiB free in torch's cache but the largest free block is 512.0 MiB: fragmentation (measured). " +
		"Suggestion: expandable_segments:True (not in force) lets such requests reuse the space."
	detail := "torch's cache at this row: 6.00 GiB free in segments, largest free block 512.0 MiB, fragmentation 91.7%; pools: default 66.00 GiB, graph 1,2 4.00 GiB; settings in force (torch's): expandable_segments:False, max_split_size_mb:512"
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newModel(t, st, Options{Title: fixTitle}, sz[0], sz[1])
			checkBox(t, m.View().Content, sz[0], sz[1])
			text := strings.Join(strings.Fields(screen(m)), " ")
			want := []string{measured, fix}
			if sz[1] == 24 {
				// too short for the whole note: its short form
				want = []string{short}
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("want %q on the screen:\n%s", w, screen(m))
				}
			}
			golden(t, fmt.Sprintf("oom_fragmentation_%dx%d", sz[0], sz[1]), ansi.Strip(m.table.View()))
			// the OOM row is the last: tab to the table, end selects it
			m = send(t, m, press("tab", "G")...)
			checkBox(t, m.View().Content, sz[0], sz[1])
			text = strings.Join(strings.Fields(screen(m)), " ")
			if sz[1] == 24 {
				// the note's short form, whole, before the row's details
				if !strings.Contains(text, strings.Replace(short, "at 0:01:25.0 in pid 4242", "selected row", 1)) {
					t.Errorf("at 80x24 the selected OOM row's note should be whole:\n%s", screen(m))
				}
			} else if !strings.Contains(text, "selected row 7 of 7: OOM") || !strings.Contains(text, detail) {
				t.Errorf("the selected OOM row's details should give torch's cache then:\n%s", screen(m))
			}
			golden(t, fmt.Sprintf("oom_fragmentation_selected_%dx%d", sz[0], sz[1]), ansi.Strip(m.table.View()))
		})
	}
}
