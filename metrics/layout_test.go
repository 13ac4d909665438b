package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// matching returns the lines of got whose series name is name.
func matching(got []string, name string) []string {
	var out []string
	for _, l := range got {
		if strings.HasPrefix(l, name+"{") {
			out = append(out, canon(l))
		}
	}
	return out
}

// The layout series come from each process-device's newest reading: a
// skip after it leaves them as they were, a pool gone from a later
// reading is gone from the scrape, and a pool listed twice or left out by
// the agent is counted as cut.
func TestCollectorLayoutSeries(t *testing.T) {
	st := newStore()
	st.AgentHello(rankHello(4242, "3"))
	st.AgentSample(4242, wire.Sample{T: t0 + ms, Dev: 0, Allocated: 1000, Reserved: 4096})
	c := NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, t0+time.Second.Nanoseconds()) }})
	proc := `gpu="0",UUID="` + uuid + `",modelName="NVIDIA H200",Hostname="node1",pid="4242",rank="3",local_rank="3",job_id="tr-5f3a"`
	pool := func(kind, id string, v int) string {
		return canon(fmt.Sprintf(`gputop_torch_pool_reserved_bytes{%s,pool_kind=%q,pool_id=%q} %d`, proc, kind, id, v))
	}
	if got := scrape(t, c); len(matching(got, "gputop_torch_segments")) != 0 || len(matching(got, "gputop_torch_pool_reserved_bytes")) != 0 {
		t.Fatalf("layout series before any reading:\n%s", strings.Join(got, "\n"))
	}

	st.AgentLayout(4242, wire.LayoutReading{Dev: 0, Layout: wire.Layout{T: t0 + 2*ms, Segments: 5, Blocks: 20, Reserved: 4096, Allocated: 1000,
		FreeInSegments: 3096, LargestFree: 1024, PoolsCut: 2, Pools: []wire.Pool{
			{Kind: wire.PoolDefault, ID: "0,0", Segments: 4, Reserved: 3072},
			{Kind: wire.PoolGraph, ID: "1,4", Segments: 1, Reserved: 1024},
			{Kind: wire.PoolGraph, ID: "1,4", Segments: 1, Reserved: 1024},
		}}})
	st.AgentLayout(4242, wire.LayoutReading{Dev: 0, Skipped: "over the bound", Layout: wire.Layout{T: t0 + 3*ms}})
	got := scrape(t, c)
	for name, want := range map[string][]string{
		"gputop_torch_free_in_segments_bytes":   {canon("gputop_torch_free_in_segments_bytes{" + proc + "} 3096")},
		"gputop_torch_largest_free_block_bytes": {canon("gputop_torch_largest_free_block_bytes{" + proc + "} 1024")},
		"gputop_torch_segments":                 {canon("gputop_torch_segments{" + proc + "} 5")},
		"gputop_torch_pool_reserved_bytes":      {pool("default", "0,0", 3072), pool("graph", "1,4", 1024)},
		"gputop_torch_pools_cut":                {"gputop_torch_pools_cut{} 3"}, // the agent's 2, the one listed twice
	} {
		if g := matching(got, name); strings.Join(g, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", name, strings.Join(g, "\n     "), strings.Join(want, "\n     "))
		}
	}

	// the graph's pool freed: its series goes
	st.AgentLayout(4242, wire.LayoutReading{Dev: 0, Layout: wire.Layout{T: t0 + 4*ms, Segments: 4, Reserved: 3072, Allocated: 1000,
		FreeInSegments: 2072, LargestFree: 2000, Pools: []wire.Pool{{Kind: wire.PoolDefault, ID: "0,0", Segments: 4, Reserved: 3072}}}})
	got = scrape(t, c)
	if g := matching(got, "gputop_torch_pool_reserved_bytes"); len(g) != 1 || g[0] != pool("default", "0,0", 3072) {
		t.Errorf("after the graph's pool went: %v", g)
	}
	if g := matching(got, "gputop_torch_largest_free_block_bytes"); len(g) != 1 || !strings.HasSuffix(g[0], " 2000") {
		t.Errorf("largest free block after the new reading: %v", g)
	}
	if g := matching(got, "gputop_torch_pools_cut"); len(g) != 1 || g[0] != "gputop_torch_pools_cut{} 0" {
		t.Errorf("pools cut after the new reading: %v", g)
	}
}

// However many processes list pools, a scrape exports MaxPoolSeries pool
// series, those that reserve most, and counts the rest.
func TestCollectorBoundsPoolSeries(t *testing.T) {
	st := newStore()
	const procs = 9
	for i := range procs {
		pid := 100 + i
		st.AgentHello(rankHello(pid, fmt.Sprint(i)))
		var pools []wire.Pool
		for j := range wire.MaxPools {
			pools = append(pools, wire.Pool{Kind: wire.PoolMemPool, ID: fmt.Sprintf("%d,%d", i, j), Reserved: uint64(1 + i*wire.MaxPools + j)})
		}
		st.AgentLayout(pid, wire.LayoutReading{Dev: 0, Layout: wire.Layout{T: t0 + ms, Reserved: 1 << 20, Pools: pools}})
	}
	c := NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, t0+time.Second.Nanoseconds()) }})
	got := scrape(t, c)
	kept := matching(got, "gputop_torch_pool_reserved_bytes")
	if len(kept) != MaxPoolSeries {
		t.Fatalf("%d pool series, want %d", len(kept), MaxPoolSeries)
	}
	cut := procs*wire.MaxPools - MaxPoolSeries
	for _, l := range kept {
		var v int
		fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
		if v <= cut {
			t.Errorf("a pool of %d bytes kept while the %d smallest are cut: %s", v, cut, l)
		}
	}
	if g := matching(got, "gputop_torch_pools_cut"); len(g) != 1 || g[0] != fmt.Sprintf("gputop_torch_pools_cut{} %d", cut) {
		t.Errorf("pools cut: %v, want %d", g, cut)
	}
}
