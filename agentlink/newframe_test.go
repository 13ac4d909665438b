package agentlink

import (
	"errors"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// probe is a frame type that exists only in this test, added through the
// table (wire.Register) and nowhere else.
type probe struct {
	Type string `json:"type"`
	T    int64  `json:"t"`
	Note string `json:"note"`
}

func (f probe) FrameType() string { return "probe" }
func (f probe) Typed() wire.Frame { f.Type = "probe"; return f }

func TestAFrameTypeAddedThroughTheTable(t *testing.T) {
	line := []byte(`{"type":"probe","t":5,"note":"hi"}`)
	if _, err := decodeFrame(line); err == nil || !strings.Contains(err.Error(), `unknown frame type "probe"`) {
		t.Fatalf("before the entry: %v, want an unknown frame type", err)
	}
	for _, c := range []struct {
		socket wire.Socket
		want   string // decodeFrame's error, then admit's; "" for none
		admit  string
	}{
		{wire.FromAgent, "", ""},
		{wire.ToPeer, "", `frame type "probe" is sent by gputop, not to it`},
		{wire.NotOnSocket, `frame type "probe" belongs in recordings, not on the agent socket`, ""},
	} {
		wire.Register(wire.FrameOf[probe](wire.Spec{Type: "probe", Socket: c.socket}, func(p *probe) error {
			if p.Note == "" {
				return errors.New(`"note" is empty`)
			}
			return nil
		}))
		f, err := decodeFrame(line)
		switch {
		case c.want != "":
			if err == nil || err.Error() != c.want {
				t.Errorf("%v: %v, want %s", c.socket, err, c.want)
			}
		case err != nil || f != any(probe{Type: "probe", T: 5, Note: "hi"}):
			t.Errorf("%v: decoded %#v, %v", c.socket, f, err)
		default:
			s := &session{state: stateAgent, pid: 7}
			if err := s.admit(f); (err == nil) != (c.admit == "") || err != nil && err.Error() != c.admit {
				t.Errorf("%v: admitted with %v, want %q", c.socket, err, c.admit)
			}
			_, err = decodeFrame([]byte(`{"type":"probe","t":5,"note":""}`))
			if err == nil || err.Error() != `probe: "note" is empty` {
				t.Errorf("%v: an empty note: %v", c.socket, err)
			}
			_, err = decodeFrame([]byte(`{"type":"probe","t":"x","note":"a"}`))
			if err == nil || err.Error() != `probe: "t" must be an integer, got string` {
				t.Errorf("%v: a string t: %v", c.socket, err)
			}
		}
		wire.Unregister("probe")
	}
}
