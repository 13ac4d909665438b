package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// cacheReading is a layout reading of the fixture's training process at
// d into the run: 512 MiB free in torch's cache, 96 MiB its largest block,
// the default pool and the pools given, with torch's settings.
func cacheReading(st *store.Store, d time.Duration, pools ...wire.Pool) {
	no := false
	l := wire.Layout{T: at(d), Segments: 6 + len(pools), Blocks: 30, Reserved: 1536 * mib, Allocated: 1024 * mib,
		FreeInSegments: 512 * mib, LargestFree: 96 * mib,
		Pools:    append([]wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 6, Reserved: 1024 * mib, Allocated: 768 * mib, LargestFree: 96 * mib}}, pools...),
		Settings: &wire.AllocSettings{From: "torch", Expandable: &no, Items: []wire.Setting{{Name: "max_split_size_mb", Value: "512"}}}}
	st.AgentLayout(fixPID, wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Layout: l})
}

var graphPool = wire.Pool{Kind: wire.PoolGraph, ID: "1,2", Segments: 2, Reserved: 512 * mib, Allocated: 256 * mib, LargestFree: 64 * mib}

// The process pane gives torch's cache of the selected process under its
// rows where the pane has the lines (not at 80x24, whose pane holds the
// rows alone): the measured figures, the pools with their bytes, the
// settings in force.
func TestProcsPaneShowsTheCache(t *testing.T) {
	st := newFixture()
	cacheReading(st, 89*time.Second, graphPool)
	want := "torch's cache, pid 4242 on GPU 0: 512.0 MiB free in segments, largest free block 96.0 MiB, fragmentation 81.2%; " +
		"pools: default 1.00 GiB, graph 1,2 512.0 MiB; settings in force (torch's): expandable_segments:False, max_split_size_mb:512"
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newModel(t, st, Options{Title: fixTitle}, sz[0], sz[1])
			checkBox(t, m.View().Content, sz[0], sz[1])
			procs := ansi.Strip(m.procs.View())
			golden(t, fmt.Sprintf("procs_cache_%dx%d", sz[0], sz[1]), procs)
			shown := strings.Contains(strings.Join(strings.Fields(procs), " "), want)
			if sz[1] > 24 && !shown {
				t.Errorf("the pane should give the selected process's cache:\n%s", procs)
			}
			if !strings.Contains(procs, "4242") || !strings.Contains(procs, "777") {
				t.Errorf("the rows come first:\n%s", procs)
			}
		})
	}
}

// A pool shows while the newest reading lists it and goes with the next
// one that does not; a skipped reading says why; an old reading says when
// it was read.
func TestProcsPaneCacheFollowsTheReadings(t *testing.T) {
	st := newFixture()
	view := func() string {
		m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
		return strings.Join(strings.Fields(ansi.Strip(m.procs.View())), " ")
	}
	cacheReading(st, 80*time.Second)
	if v := view(); !strings.Contains(v, "all in the default pool") || !strings.Contains(v, "; read 10s before now") {
		t.Fatalf("the default pool alone, read 10 s ago:\n%s", v)
	}
	cacheReading(st, 85*time.Second, graphPool)
	if v := view(); !strings.Contains(v, "pools: default 1.00 GiB, graph 1,2 512.0 MiB") {
		t.Fatalf("the graph's pool should show:\n%s", v)
	}
	cacheReading(st, 86*time.Second)
	if v := view(); strings.Contains(v, "graph 1,2") || !strings.Contains(v, "all in the default pool") {
		t.Fatalf("the graph's pool should be gone:\n%s", v)
	}
	st.AgentLayout(fixPID, wire.LayoutReading{Type: wire.TypeLayout, Dev: 0, Skipped: "the reading would take 80 ms, over the 50 ms bound",
		Layout: wire.Layout{T: at(87 * time.Second)}})
	if v := view(); !strings.Contains(v, "; the newest reading was skipped: the reading would take 80 ms, over the 50 ms bound") {
		t.Fatalf("the skip's reason should show:\n%s", v)
	}
}

// L shows the selected process's largest free block on the chart, with
// its source in the legend, and hides it again; it is off at the start.
func TestLargestFreeBlockSeries(t *testing.T) {
	st := newFixture()
	for s := 70; s <= 89; s++ {
		cacheReading(st, time.Duration(s)*time.Second)
	}
	m := newModel(t, st, Options{Title: fixTitle}, 160, 50)
	if c := ansi.Strip(m.chart.View()); strings.Contains(c, "largest free") {
		t.Fatalf("the series should be off at the start:\n%s", c)
	}
	m = send(t, m, press("L")...)
	c := ansi.Strip(m.chart.View())
	if !strings.Contains(c, "━ largest free block (read ~1/s) 96.0 MiB") {
		t.Fatalf("L should show the largest free block with its source and value:\n%s", c)
	}
	golden(t, "chart_largest_free_160x50", c)
	// wide enough for every series' full name: the source's too
	wide := send(t, newModel(t, st, Options{Title: fixTitle}, 230, 50), press("L")...)
	if c := ansi.Strip(wide.chart.View()); !strings.Contains(c, "━━ "+present.LargestFreeSeries+" 96.0 MiB") {
		t.Errorf("at 230 columns the legend should name the series in full:\n%s", c)
	}
	if !strings.Contains(screen(send(t, m, press("?")...)), "hide largest free block") {
		t.Error("the help should say L now hides it")
	}
	m = send(t, m, press("L")...)
	if c := ansi.Strip(m.chart.View()); strings.Contains(c, "largest free") {
		t.Fatalf("L again should hide it:\n%s", c)
	}
}
