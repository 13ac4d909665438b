package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gputop/gputop/wire"
)

// absentFromDashboard are the series contrib/grafana/gputop.json leaves
// out on purpose, each with why.
var absentFromDashboard = map[string]string{
	"gputop_snapshots_total": "a count of the rows made: the snapshot annotation marks each one at its time",
}

// dashboard is what the test reads of contrib/grafana/gputop.json.
type dashboard struct {
	Panels []struct {
		Title       string `json:"title"`
		Repeat      string `json:"repeat"`
		FieldConfig struct {
			Defaults struct {
				Custom struct {
					Stacking struct {
						Mode string `json:"mode"`
					} `json:"stacking"`
				} `json:"custom"`
			} `json:"defaults"`
			Overrides []struct {
				Matcher struct {
					ID      string `json:"id"`
					Options string `json:"options"`
				} `json:"matcher"`
				Properties []struct {
					ID    string          `json:"id"`
					Value json.RawMessage `json:"value"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("../contrib/grafana/gputop.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("contrib/grafana/gputop.json: %v", err)
	}
	return d
}

// Every series the collector describes, and every one docs/clusters.md's metrics
// table names, is queried by a panel or an annotation of the Grafana
// dashboard, or listed in absentFromDashboard with why (and then not
// queried, and still a series).
func TestDashboardCoversEverySeries(t *testing.T) {
	d := readDashboard(t)
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, a := range d.Annotations.List {
		exprs = append(exprs, a.Expr)
	}
	series := regexp.MustCompile(`gputop_[a-z0-9_]+`)
	queried := map[string]bool{}
	for _, e := range exprs {
		for _, s := range series.FindAllString(e, -1) {
			queried[s] = true
		}
	}

	names := map[string]string{} // name: where it is named
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		NewCollector(newStore(), Options{Window: time.Minute}).Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			names[m[1]] = "the collector"
		}
	}
	readme, err := os.ReadFile("../docs/clusters.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "## Prometheus metrics"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[3:], "\n## "); j >= 0 {
			section = section[:j+3]
		}
		for _, m := range regexp.MustCompile("`(gputop_[a-z0-9_]+)[`{]").FindAllStringSubmatch(section, -1) {
			if _, ok := names[m[1]]; !ok {
				names[m[1]] = "docs/clusters.md's metrics table"
			}
		}
	} else {
		t.Error(`docs/clusters.md has no "## Prometheus metrics" section`)
	}
	if len(names) < 20 {
		t.Fatalf("only %d series found", len(names))
	}
	for name, where := range names {
		why, absent := absentFromDashboard[name]
		switch {
		case absent && queried[name]:
			t.Errorf("%s is listed as absent from the dashboard (%s) but a panel queries it", name, why)
		case !absent && !queried[name]:
			t.Errorf("%s (named by %s) is in no panel of contrib/grafana/gputop.json: add one, or list it in absentFromDashboard with why", name, where)
		}
	}
	for name := range absentFromDashboard {
		if _, ok := names[name]; !ok {
			t.Errorf("absentFromDashboard lists %s, which is no series", name)
		}
	}
	for s := range queried {
		if _, ok := names[s]; !ok && !strings.HasSuffix(s, "_") {
			t.Errorf("the dashboard queries %s, which the collector does not describe", s)
		}
	}
}

// The ledger's panel stacks every part of a process's ledger, one query
// per part in the compact ledger's order (params at the bottom), each
// part the colour of its letter in the TUI's stacked bar, one panel per
// process.
func TestDashboardStacksTheLedger(t *testing.T) {
	d := readDashboard(t)
	order := []string{wire.PartParams, wire.PartGrads, wire.PartOptimizer, wire.PartActivations, wire.PartOtherTensors,
		wire.PartWorkspace, wire.PartUnattributed, wire.PartCachedFree, wire.PartOutsideTorch}
	// the TUI's colours (ui/ledger.go's ledgerPartStyles)
	colours := map[string]string{
		wire.PartParams: "#5F87FF", wire.PartGrads: "#AF87FF", wire.PartOptimizer: "#FF87D7", wire.PartActivations: "#FFAF00",
		wire.PartOtherTensors: "#00D7AF", wire.PartWorkspace: "#AFAF87", wire.PartUnattributed: "#FF5F5F",
		wire.PartCachedFree: "#6C6C6C", wire.PartOutsideTorch: "#D7D75F",
	}
	found := false
	for _, p := range d.Panels {
		if len(p.Targets) == 0 || !strings.Contains(p.Targets[0].Expr, "gputop_torch_ledger_bytes") {
			continue
		}
		found = true
		if p.FieldConfig.Defaults.Custom.Stacking.Mode != "normal" {
			t.Errorf("%q: stacking %q, want normal", p.Title, p.FieldConfig.Defaults.Custom.Stacking.Mode)
		}
		if p.Repeat == "" || !slices.ContainsFunc(d.Templating.List, func(v struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		}) bool {
			return v.Name == p.Repeat
		}) {
			t.Errorf("%q repeats over %q, want a dashboard variable (a panel per process)", p.Title, p.Repeat)
		}
		var parts []string
		for _, tg := range p.Targets {
			m := regexp.MustCompile(`part="([a-z_]+)"`).FindStringSubmatch(tg.Expr)
			if m == nil || !strings.Contains(tg.Expr, `pid=~"$`+p.Repeat+`"`) {
				t.Errorf("%q: query %q is not one part of the repeated process", p.Title, tg.Expr)
				continue
			}
			parts = append(parts, m[1])
			colour := ""
			for _, o := range p.FieldConfig.Overrides {
				if o.Matcher.Options != tg.LegendFormat {
					continue
				}
				for _, pr := range o.Properties {
					var c struct {
						FixedColor string `json:"fixedColor"`
					}
					if pr.ID == "color" && json.Unmarshal(pr.Value, &c) == nil {
						colour = c.FixedColor
					}
				}
			}
			if !strings.EqualFold(colour, colours[m[1]]) {
				t.Errorf("%q: %s is coloured %q, want the TUI's %s", p.Title, m[1], colour, colours[m[1]])
			}
		}
		if !slices.Equal(parts, order) {
			t.Errorf("%q stacks %v, want %v", p.Title, parts, order)
		}
	}
	if !found {
		t.Error("no panel of contrib/grafana/gputop.json shows gputop_torch_ledger_bytes")
	}
}
