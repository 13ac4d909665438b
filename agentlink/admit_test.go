package agentlink

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gputop/gputop/wire"
)

// Frames a live gputop could hold but a recording could not give back are
// refused over the real socket with a reason, and other agents carry on: a
// time more than wire.MaxClockSkew from gputop's clock (a recording keeps
// times near its start), a frame that decodes and encodes again to more
// than wire.MaxFrameBytes, and a hello naming one GPU twice.
func TestFramesARecordingCouldNotKeepAreRefused(t *testing.T) {
	st := newStore(t, true)
	srv := startServer(t, st, nil)
	day := int64(25 * time.Hour)
	groups := bytes.Repeat([]byte("{},"), 300_000) // 900 KB that encode to 13 MB
	cases := []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"old sample", lines(hello(11), sample(0, t0-day, 1)),
			`line 2: sample: "t" 1767135600000000000 (2025-12-30T23:00:00Z) is more than 24h0m0s from gputop's clock`},
		{"future hello", lines(withT(hello(12), t0+day)), `line 1: hello: "t" 1767315600000000000`},
		{"mark from 1970", lines(hello(13), wire.Mark{Type: wire.TypeMark, T: 1, Label: "x"}), `line 2: mark: "t" 1 (1970-01-01T00:00:00Z)`},
		{"expanding holders", append(lines(hello(14)), append(append([]byte(`{"type":"holders","t":1767225600001000000,"dev":0,"total":0,"skipped":0,"groups":[`),
			groups[:len(groups)-1]...), ']', '}', '\n')),
			"line 2: holders: 13200083 bytes once decoded and encoded again (as gputop records it), over the 1048576-byte limit"},
		{"one GPU twice", lines(hello(15, wire.AgentDevice{Index: 0, UUID: uuidA}, wire.AgentDevice{Index: 1, UUID: uuidA})),
			`line 1: hello: cuda:0 and cuda:1 have the same "uuid" "` + uuidA + `"`},
	}
	good := dial(t, srv.Path())
	good.sendFrame(hello(99, wire.AgentDevice{Index: 0, UUID: uuidA}))
	for i, c := range cases {
		p := dial(t, srv.Path())
		p.send(c.lines...)
		r := p.reply()
		if r.OK || !strings.HasPrefix(r.Error, c.want) {
			t.Errorf("%s: reply %+v, want an error starting %q", c.name, r, c.want)
		}
		p.closed()
		srv.logs.wait(t, c.want[:20])
		good.sendFrame(sample(0, t0+int64(i+1)*ms, uint64(i+1)))
	}
	waitFor(t, "the good agent's samples", func() bool {
		a, ok := agentByPID(st, 99)
		return ok && a.Last[0].Allocated == uint64(len(cases))
	})
	if len(st.Rows()) != 0 {
		t.Errorf("a refused mark made rows: %+v", st.Rows())
	}
}

func withT(h wire.Hello, t int64) wire.Hello { h.T = t; return h }

// lines encodes frames as lines.
func lines(frames ...any) [][]byte {
	var out [][]byte
	for _, f := range frames {
		b, err := encodeLine(f)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}
