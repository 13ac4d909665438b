// The series a scrape sends: a value and its label set, the set built
// once for every series of a device or process. prometheus.MustNewConstMetric
// built and sorted a set for each series (a third of a scrape's time).

package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// labelSet is a series' labels, sorted by name as the registry wants them;
// shared, never changed once made.
type labelSet []*dto.LabelPair

// labelsOf pairs names with values (as many; values are not changed after).
func labelsOf(names, values []string) labelSet {
	out := make(labelSet, len(names))
	for i := range names {
		out[i] = &dto.LabelPair{Name: &names[i], Value: &values[i]}
	}
	slices.SortFunc(out, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// constMetric is one series' value at this scrape, a gauge or a counter.
type constMetric struct {
	desc   *prometheus.Desc
	gauge  bool
	v      float64
	labels labelSet
}

func (m constMetric) Desc() *prometheus.Desc { return m.desc }

func (m constMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	if m.gauge {
		out.Gauge = &dto.Gauge{Value: &m.v}
	} else {
		out.Counter = &dto.Counter{Value: &m.v}
	}
	return nil
}
