// Package metrics exposes the store to Prometheus: a collector that reads
// the store at each scrape (no second copy of the data) and the HTTP
// endpoint that serves it. Labels follow dcgm-exporter's (gpu, UUID,
// modelName, Hostname), so gputop's series join DCGM_FI_DEV_FB_USED.
package metrics

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gputop/gputop/forecast"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Options shape what a collector exports.
type Options struct {
	Hostname string // the Hostname label (dcgm-exporter's: the node's name)
	// GoneFor is how long a process whose agent has ended keeps its series
	// (its final values stay visible to the next scrapes); MaxGone bounds
	// how many such processes are exported at once, the most recently
	// ended first, so thousands of short-lived processes cannot grow the
	// label sets. Zero values mean DefaultGoneFor and DefaultMaxGone.
	GoneFor time.Duration
	MaxGone int
	// Window is the trailing window of the _max_ and _min_ series: each
	// scrape reports the extremes of the samples taken over it, so any
	// number of scrapers see the same spike. Zero means DefaultWindow.
	Window time.Duration
	Now    func() time.Time // time.Now when nil

	// The server's (Listen): WebConfig is an exporter-toolkit web
	// configuration file (TLS, basic auth; "" for plain HTTP), Log gets
	// the HTTP server's errors (never stderr, which may be a TUI's).
	WebConfig string
	Log       func(string)
}

const (
	DefaultGoneFor = time.Minute
	DefaultMaxGone = 64
	// DefaultWindow covers Prometheus's usual 15 s scrape interval twice,
	// so a scrape that comes late still overlaps the one before it.
	DefaultWindow = 30 * time.Second
	// MinWindow and MaxWindow bound --metrics-window (its message says
	// 1s to 1h): the store keeps every sample for 30 s and min/max
	// buckets for much longer, so an hour is still answered without
	// missing a spike.
	MinWindow = time.Second
	MaxWindow = time.Hour
	// RowLabels is how many distinct snapshot labels
	// gputop_snapshot_timestamp_seconds carries: the newest.
	RowLabels = 10
	// rowsRead bounds the rows a scrape reads to find them.
	rowsRead = 512
	// maxLabelBytes clips peer-chosen label values (snapshot labels).
	maxLabelBytes = 100
	// MaxPoolSeries bounds the gputop_torch_pool_reserved_bytes series of
	// one scrape: a layout lists at most wire.MaxPools pools, but every
	// process on every GPU may have its own; past it the pools that
	// reserve least are left out, and counted (gputop_torch_pools_cut).
	MaxPoolSeries = 256
)

// The process labels add job_id, not job: job is the label Prometheus
// gives every target, and a scraped job label would be renamed
// exported_job (or, with honor_labels, replace the scrape job's name).
var (
	gpuLabels  = []string{"gpu", "UUID", "modelName", "Hostname"}
	procLabels = append(append([]string(nil), gpuLabels...), "pid", "rank", "local_rank", "job_id")
	poolLabels = append(append([]string(nil), procLabels...), "pool_kind", "pool_id")
	// nvmlLabels add what NVML's figures measure: memory="system" on a
	// unified-memory GPU (GH200, GB10), whose NVML memory query answers
	// not supported: the system's memory, from /proc/meminfo; empty (so
	// absent: the series are those of earlier versions) for the GPU's own
	nvmlLabels = append(append([]string(nil), gpuLabels...), "memory")
	snapLabels = []string{"label"}
	// a framework beside torch (JAX, CuPy): its name, and its own name
	// for the figure ("bytes_in_use")
	frameworkLabels = append(append([]string(nil), procLabels...), "framework", "native")
)

// The frameworks' series, by gputop's figure (wire.FigInUse ...).
var frameworkDescs = []struct {
	of   string
	desc *prometheus.Desc
}{
	{wire.FigInUse, desc("gputop_framework_in_use_bytes", "Bytes in use by a framework other than torch, in its own figure (JAX bytes_in_use, CuPy used_bytes; native names it), from its newest reading.", frameworkLabels)},
	{wire.FigReserved, desc("gputop_framework_reserved_bytes", "Bytes a framework's allocator holds from the device (JAX pool_bytes: the preallocated pool, or bytes_reserved; CuPy total_bytes).", frameworkLabels)},
	{wire.FigPeak, desc("gputop_framework_peak_bytes", "The most a framework had in use (JAX peak_bytes_in_use).", frameworkLabels)},
	{wire.FigLimit, desc("gputop_framework_limit_bytes", "The most a framework's allocator may hold (JAX bytes_limit, CuPy's pool limit when set).", frameworkLabels)},
}

func desc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descNVMLUsed  = desc("gputop_nvml_used_bytes", "Device memory used, from NVML (newest sample); memory=\"system\": the system's memory (unified memory).", nvmlLabels)
	descNVMLTotal = desc("gputop_nvml_total_bytes", "Device memory in all, from NVML; memory=\"system\": the system's memory (unified memory).", nvmlLabels)
	descRate      = desc("gputop_sample_rate_hz", "NVML device samples per second achieved.", gpuLabels)

	descAllocated = desc("gputop_torch_allocated_bytes", "torch.cuda allocated_bytes.all.current, from the process's agent.", procLabels)
	descReserved  = desc("gputop_torch_reserved_bytes", "torch.cuda reserved_bytes.all.current.", procLabels)
	descPeak      = desc("gputop_torch_peak_allocated_bytes", "torch.cuda allocated_bytes.all.peak (torch's own peak, since its last reset_peak_memory_stats).", procLabels)
	descInactive  = desc("gputop_torch_inactive_split_bytes", "torch.cuda inactive_split_bytes.all.current.", procLabels)
	descRetries   = desc("gputop_torch_alloc_retries_total", "torch.cuda num_alloc_retries.", procLabels)
	descOOMs      = desc("gputop_torch_ooms_total", "torch.cuda num_ooms.", procLabels)
	descProcUsed  = desc("gputop_process_nvml_used_bytes", "The process's used device memory, from NVML's process list.", procLabels)

	// from the newest layout reading of the process's agent
	descFreeInSegs   = desc("gputop_torch_free_in_segments_bytes", "Bytes free inside the segments torch's caching allocator holds (reserved - allocated), from the newest layout reading.", procLabels)
	descLargestFree  = desc("gputop_torch_largest_free_block_bytes", "The largest free block in torch's cache: the most one request can take without new memory from the driver (newest layout reading).", procLabels)
	descSegments     = desc("gputop_torch_segments", "Segments (cudaMalloc'd regions) torch's caching allocator holds (newest layout reading).", procLabels)
	descPoolReserved = desc("gputop_torch_pool_reserved_bytes", "Bytes one memory pool reserves: the default pool, a CUDA graph's private pool or a torch.cuda.MemPool (newest layout reading; the "+
		strconv.Itoa(MaxPoolSeries)+" largest pool series of a scrape).", poolLabels)
	descPoolsCut = desc("gputop_torch_pools_cut", "Pools of the newest layout readings left out of gputop_torch_pool_reserved_bytes: past its "+
		strconv.Itoa(MaxPoolSeries)+" series (the smallest), listed twice in one layout, or left out by the agent (past "+strconv.Itoa(wire.MaxPools)+" in one layout).", nil)

	// from the process's forecast (package forecast), absent when it is
	// stable or has too little data
	descStepsToOOM = desc("gputop_torch_forecast_steps_to_oom", "Steps until the process's memory reaches what it can have at its present growth (the forecast's central figure, from its \"Step N\" rows); absent when the forecast is stable, has too little data, or counts in epochs or time.", procLabels)
	descSecsToOOM  = desc("gputop_torch_forecast_seconds_to_oom", "Seconds until the process's memory reaches what it can have at its present growth: a forecast in time, or one in steps or epochs whose rows' times say how long one takes; absent when stable or without enough data.", procLabels)

	descRows     = desc("gputop_snapshots_total", "Rows taken (keys, code, gputop snap, OOMs).", nil)
	descSnapTime = desc("gputop_snapshot_timestamp_seconds", "When the newest snapshot of each label was taken (the newest few labels), for annotations.", snapLabels)
)

// Collector is a prometheus.Collector over a store. It keeps nothing
// between scrapes: scrapes may run at once, and each answers from the
// store alone.
type Collector struct {
	st  *store.Store
	opt Options
	// the windowed series, whose help text states the window
	usedMax, usedMin, allocatedMax *prometheus.Desc
}

// NewCollector returns a collector over st.
func NewCollector(st *store.Store, opt Options) *Collector {
	if opt.GoneFor <= 0 {
		opt.GoneFor = DefaultGoneFor
	}
	if opt.MaxGone <= 0 {
		opt.MaxGone = DefaultMaxGone
	}
	if opt.Window <= 0 {
		opt.Window = DefaultWindow
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	w := opt.Window.String()
	return &Collector{st: st, opt: opt,
		usedMax: desc("gputop_nvml_used_max_bytes", "Highest NVML used sample over the trailing "+w+
			" (sampled at up to 1 kHz; the same for every scraper).", nvmlLabels),
		usedMin: desc("gputop_nvml_used_min_bytes", "Lowest NVML used sample over the trailing "+w+".", nvmlLabels),
		allocatedMax: desc("gputop_torch_allocated_max_bytes", "Highest allocated sample over the trailing "+w+
			" (the same for every scraper).", procLabels),
	}
}

// Describe sends every descriptor the collector uses.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNVMLUsed, descNVMLTotal, c.usedMax, c.usedMin, descRate,
		descAllocated, descReserved, descPeak, c.allocatedMax, descInactive, descRetries, descOOMs, descProcUsed,
		descFreeInSegs, descLargestFree, descSegments, descPoolReserved, descPoolsCut, descLedger,
		descStepsToOOM, descSecsToOOM, descRows, descSnapTime} {
		ch <- d
	}
	for _, f := range frameworkDescs {
		ch <- f.desc
	}
}

// Collect reads the store once: devices, agents, rows.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	from := c.opt.Now().Add(-c.opt.Window).UnixNano()
	extremes := func(k store.Key) store.Extremes { return c.st.ExtremesFrom(k, from) }
	gauge := func(d *prometheus.Desc, v float64, l labelSet) { ch <- constMetric{d, true, v, l} }
	counter := func(d *prometheus.Desc, v float64, l labelSet) { ch <- constMetric{d, false, v, l} }

	devs := c.st.Devices()
	devLabels := make(map[int][]string, len(devs))
	for _, d := range devs {
		if d.UUID == "" && d.Name == "" {
			continue // a gap in the device list, never described
		}
		host := c.opt.Hostname
		if d.Host != "" {
			host = labelText(d.Host) // a remote host's GPU (--ssh)
		}
		gl := []string{strconv.Itoa(d.Index), labelText(d.UUID), labelText(d.Name), host}
		devLabels[d.Index] = gl
		if d.Source != "nvml" {
			continue // known only through an agent: NVML says nothing of it
		}
		l := labelsOf(gpuLabels, gl)
		nl := labelsOf(nvmlLabels, append(append(make([]string, 0, len(gl)+1), gl...), d.Memory))
		gauge(descNVMLTotal, float64(d.Total), nl)
		if d.Rate > 0 {
			gauge(descRate, d.Rate, l)
		}
		if e := extremes(store.Key{Dev: d.Index, Metric: store.NVMLUsed}); e.OK {
			gauge(descNVMLUsed, float64(e.Last), nl)
			gauge(c.usedMax, float64(e.Max), nl)
			gauge(c.usedMin, float64(e.Min), nl)
		}
	}

	var pools poolSeries
	ledgers := newLedgers(c.st)
	now := c.opt.Now().UnixNano()
	for _, a := range c.exported(c.st.Agents()) {
		pid := a.Hello.PID
		p := a.Place
		rank, local := "", ""
		if p.Rank >= 0 {
			rank = strconv.Itoa(p.Rank)
		}
		if p.LocalRank >= 0 {
			local = strconv.Itoa(p.LocalRank)
		}
		for _, dev := range sortedDevs(a.DevMap) {
			gl, ok := devLabels[dev]
			if !ok {
				continue
			}
			// a remote host's process: its own pid, its host in Hostname;
			// one in a pid namespace gputop cannot see: "ns3:1", as no two
			// such processes may share a label set
			pv := append(append(make([]string, 0, len(procLabels)), gl...), store.PIDText(pid), rank, local, labelText(p.Job))
			l := labelsOf(procLabels, pv)
			if smp, ok := a.Last[dev]; ok {
				gauge(descAllocated, float64(smp.Allocated), l)
				gauge(descReserved, float64(smp.Reserved), l)
				gauge(descPeak, float64(smp.Peak), l)
				gauge(descInactive, float64(smp.Inactive), l)
				counter(descRetries, float64(smp.AllocRetries), l)
				counter(descOOMs, float64(smp.OOMs), l)
			}
			if e := extremes(store.Key{Dev: dev, PID: pid, Metric: store.Allocated}); e.OK {
				gauge(c.allocatedMax, float64(e.Max), l)
			}
			if at := c.st.LatestLayout(pid, dev); at.OK {
				gauge(descFreeInSegs, float64(at.Layout.FreeInSegments), l)
				gauge(descLargestFree, float64(at.Layout.LargestFree), l)
				gauge(descSegments, float64(at.Layout.Segments), l)
				pools.add(pv, at.Layout)
			}
			ledgers.emit(c.st, pid, dev, pv, gauge)
			if at := c.st.LatestFrameworks(pid, dev); at.OK {
				emitFrameworks(gauge, pv, at.Frameworks)
			}
			if a.Connected {
				c.forecast(gauge, &a, dev, now, l)
				if procs, _ := c.st.Procs(dev); len(procs) > 0 {
					for _, pr := range procs {
						if pr.PID == pid && !pr.UsedUnknown {
							gauge(descProcUsed, float64(pr.Used), l)
						}
					}
				}
			}
		}
	}

	for _, p := range pools.kept() {
		gauge(descPoolReserved, float64(p.reserved), labelsOf(poolLabels, p.labels))
	}
	gauge(descPoolsCut, float64(pools.cut), nil)

	counter(descRows, float64(c.st.Shape().RowsMade), nil)
	for _, s := range newestLabels(c.st.LastRows(rowsRead), RowLabels) {
		gauge(descSnapTime, float64(s.T)/1e9, labelsOf(snapLabels, []string{labelText(s.Label)}))
	}
}

// forecast exports a connected process's forecast on dev at now, when it
// predicts an OOM.
func (c *Collector) forecast(gauge func(*prometheus.Desc, float64, labelSet), a *store.Agent, dev int, now int64, l labelSet) {
	f := forecast.For(c.st, a, dev, now, true)
	if f.Status != forecast.OOM || f.Limit == 0 {
		return
	}
	if f.Unit == forecast.Steps {
		gauge(descStepsToOOM, f.In, l)
	}
	if s, ok := f.SecondsToOOM(); ok {
		gauge(descSecsToOOM, s, l)
	}
}

// poolSeries gathers a scrape's gputop_torch_pool_reserved_bytes series,
// at most MaxPoolSeries of them, and counts the pools left out.
type poolSeries struct {
	all []poolSeriesOne
	cut int
}

type poolSeriesOne struct {
	labels   []string
	reserved uint64
}

// add takes the pools of one process-device's layout (proc: its labels):
// a pool listed twice in it (the same kind and id) would be one series
// twice, which fails the whole scrape, so only its first counts.
func (ps *poolSeries) add(proc []string, l wire.Layout) {
	ps.cut += l.PoolsCut
	seen := make(map[[2]string]bool, len(l.Pools))
	for _, p := range l.Pools {
		k := [2]string{labelText(p.Kind), labelText(p.ID)}
		if seen[k] {
			ps.cut++
			continue
		}
		seen[k] = true
		ps.all = append(ps.all, poolSeriesOne{append(slices.Clip(proc), k[0], k[1]), p.Reserved})
	}
}

// kept is the MaxPoolSeries that reserve most; the rest are counted cut.
func (ps *poolSeries) kept() []poolSeriesOne {
	if len(ps.all) <= MaxPoolSeries {
		return ps.all
	}
	slices.SortStableFunc(ps.all, func(a, b poolSeriesOne) int { return cmp.Compare(b.reserved, a.reserved) })
	ps.cut += len(ps.all) - MaxPoolSeries
	return ps.all[:MaxPoolSeries]
}

// exported picks the agents whose series are exported: every connected
// one, and those ended within GoneFor, at most MaxGone of them, the most
// recently ended first.
func (c *Collector) exported(agents []store.Agent) []store.Agent {
	cutoff := c.opt.Now().Add(-c.opt.GoneFor).UnixNano()
	var live, gone []store.Agent
	for _, a := range agents {
		switch {
		case a.Connected:
			live = append(live, a)
		case a.EndedAt >= cutoff:
			gone = append(gone, a)
		}
	}
	sort.SliceStable(gone, func(i, j int) bool { return gone[i].EndedAt > gone[j].EndedAt })
	if len(gone) > c.opt.MaxGone {
		gone = gone[:c.opt.MaxGone]
	}
	return append(live, gone...)
}

func sortedDevs(m map[int]int) []int {
	devs := make([]int, 0, len(m))
	for _, d := range m {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	// two torch indices cannot share a device (wire.Check), but keep each once
	out := devs[:0]
	for i, d := range devs {
		if i == 0 || d != devs[i-1] {
			out = append(out, d)
		}
	}
	return out
}

// newestLabels returns the newest row of each of the n most recently
// used labels, newest first.
func newestLabels(rows []wire.Row, n int) []wire.Row {
	var out []wire.Row
	seen := map[string]bool{}
	for i := len(rows) - 1; i >= 0 && len(out) < n; i-- {
		l := labelText(rows[i].Label)
		if seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, rows[i])
	}
	return out
}

// labelText is a label value made of text from outside (already made
// printable by the store): valid UTF-8, as Prometheus requires, and short.
func labelText(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // invalid bytes become U+FFFD
	}
	if len(s) <= maxLabelBytes {
		return s
	}
	cut := maxLabelBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// emitFrameworks exports the figures of each framework beside torch on
// one process-device (proc: its labels); a framework listed twice keeps
// its first reading, as two would be one series.
func emitFrameworks(gauge func(*prometheus.Desc, float64, labelSet), proc []string, fs []wire.Framework) {
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f.Name] {
			continue
		}
		seen[f.Name] = true
		for _, d := range frameworkDescs {
			if g, ok := f.Get(d.of); ok {
				gauge(d.desc, float64(g.Value), labelsOf(frameworkLabels, append(slices.Clip(proc), labelText(f.Name), labelText(g.Native))))
			}
		}
	}
}
