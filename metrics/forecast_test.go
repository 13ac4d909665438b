package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// steps gives process pid n "Step N" rows a second apart from t0, its
// allocated growing by leak a step from 2 GiB with a 1 GiB transient.
func steps(st interface {
	AgentSample(int, wire.Sample) bool
	AgentMark(int, wire.Mark) []wire.Row
}, pid, n int, leak uint64) int64 {
	var t int64
	for i := 1; i <= n; i++ {
		b := uint64(2<<30) + uint64(i-1)*leak
		t = t0 + int64(i)*int64(time.Second)
		st.AgentSample(pid, wire.Sample{T: t - 500*ms, Dev: 0, Allocated: b + 1<<30, Reserved: b + 1<<30, Peak: b + 1<<30})
		st.AgentMark(pid, wire.Mark{Type: wire.TypeMark, T: t, Label: fmt.Sprintf("Step %d", i),
			Devs: []wire.DevStats{{Dev: 0, Allocated: b + leak, Reserved: b + 1<<30, Peak: b + 1<<30}}})
	}
	return t
}

// A process whose memory grows a fixed amount a step has its steps and
// seconds to the OOM; a stable one has neither series.
func TestCollectorForecastSeries(t *testing.T) {
	st := newStore()
	h := rankHello(4242, "0")
	h.Devices[0].Total = 16 << 30
	st.AgentHello(h)
	end := steps(st, 4242, 20, 64<<20)
	h2 := rankHello(4343, "1")
	h2.Devices[0].Total = 16 << 30
	st.AgentHello(h2)
	steps(st, 4343, 20, 0)
	c := NewCollector(st, Options{Hostname: "node1", Now: func() time.Time { return time.Unix(0, end) }})
	got := strings.Join(scrape(t, c), "\n")
	// the peak of step 20 is 2 GiB + 19·64 MiB + 1 GiB: 16 GiB is 189 steps on
	for _, want := range []string{
		`gputop_torch_forecast_steps_to_oom{Hostname="node1",UUID="` + uuid + `",gpu="0",job_id="tr-5f3a",local_rank="0",modelName="NVIDIA H200",pid="4242",rank="0"} 189`,
		`gputop_torch_forecast_seconds_to_oom{Hostname="node1",UUID="` + uuid + `",gpu="0",job_id="tr-5f3a",local_rank="0",modelName="NVIDIA H200",pid="4242",rank="0"} 189`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(got, `forecast_steps_to_oom{Hostname="node1",UUID="`+uuid+`",gpu="0",job_id="tr-5f3a",local_rank="1"`) ||
		strings.Count(got, "gputop_torch_forecast_") != 2 {
		t.Errorf("the stable process has a forecast series:\n%s", got)
	}
}
