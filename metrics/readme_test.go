package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Every series the collector describes has a line in README's metrics
// table, named as it is exported.
func TestEverySeriesDocumented(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Prometheus metrics")
	if i < 0 {
		t.Fatal(`README.md has no "## Prometheus metrics" section`)
	}
	section := readme[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		NewCollector(newStore(), Options{Window: time.Minute}).Describe(ch)
		close(ch)
	}()
	n := 0
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		n++
		if !strings.Contains(section, "`"+m[1]+"`") && !strings.Contains(section, "`"+m[1]+"{") {
			t.Errorf("%s is not in README's metrics table", m[1])
		}
	}
	if n < 20 {
		t.Errorf("only %d series described", n)
	}
}
