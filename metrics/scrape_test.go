package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A scrape builds each device's and process's label set once and shares
// it among that device's or process's series: an 8-GPU node's scrape made
// 30 allocations a series when each series built and sorted its own (a
// third of a scrape's time), 9 since.
func TestScrapeSharesLabelSets(t *testing.T) {
	st, at := busyStore(t)
	reg := prometheus.NewRegistry() // the server's
	reg.MustRegister(NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, at) }}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range fams {
		series += len(f.GetMetric())
	}
	if series < 80 {
		t.Fatalf("%d series; the 8-GPU node should give about 90", series)
	}
	allocs := testing.AllocsPerRun(5, func() { reg.Gather() })
	if per := allocs / float64(series); per > 12 {
		t.Errorf("a scrape of %d series made %.0f allocations, %.1f a series; want at most 12", series, allocs, per)
	}
}
