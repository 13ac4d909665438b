package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The series table of docs/clusters.md's "Prometheus metrics" names the
// series the collector describes, both ways: each series has a line, named
// as it is exported, and each name in the table's first column is a series.
func TestEverySeriesDocumented(t *testing.T) {
	const path = "../docs/clusters.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Prometheus metrics\n")
	if i < 0 {
		t.Fatalf(`%s has no "## Prometheus metrics" section`, path)
	}
	section := doc[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		NewCollector(newStore(), Options{Window: time.Minute}).Describe(ch)
		close(ch)
	}()
	var series []string
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		series = append(series, m[1])
		if !strings.Contains(section, "`"+m[1]+"`") && !strings.Contains(section, "`"+m[1]+"{") {
			t.Errorf("%s is not in %s's metrics table", m[1], path)
		}
	}
	if len(series) < 20 {
		t.Errorf("only %d series described", len(series))
	}
	documented := regexp.MustCompile("`(gputop_[a-z_]+)[`{]")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		first, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		if !strings.HasPrefix(line, "| `gputop_") || !ok {
			continue
		}
		rows++
		for _, m := range documented.FindAllStringSubmatch(first, -1) {
			if !slices.Contains(series, m[1]) {
				t.Errorf("%s's metrics table names %s, a series the collector does not describe", path, m[1])
			}
		}
	}
	if rows < 10 {
		t.Errorf("%s's metrics table has %d rows of series", path, rows)
	}
}
