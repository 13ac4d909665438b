package recording

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// probe is a frame type that exists only in this test: added through the
// table (wire.Register) and nowhere else, it must be recorded, decoded,
// checked for its required fields and its own checks, and loaded.
type probe struct {
	Type  string `json:"type"`
	T     int64  `json:"t"`
	Note  string `json:"note"`
	Extra int    `json:"extra,omitempty"`
}

func (f probe) FrameType() string { return "probe" }
func (f probe) Typed() wire.Frame { f.Type = "probe"; return f }

func registerProbe(t *testing.T) {
	wire.Register(wire.FrameOf[probe](wire.Spec{Type: "probe", Recorded: true, Doc: "a test's"},
		func(p *probe) error {
			if p.Note == "" {
				return errors.New(`"note" is empty`)
			}
			return nil
		}))
	t.Cleanup(func() { wire.Unregister("probe") })
}

func TestAFrameTypeAddedThroughTheTable(t *testing.T) {
	registerProbe(t)
	path := tempPath(t, "probe.gputop")
	w, err := Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	sent := probe{T: base + 1000, Note: "hi", Extra: 2}
	w.Frame(sent)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, path)
	line := fmt.Sprintf(`{"type":"probe","t":%d,"note":"hi","extra":2}`, sent.T)
	if !bytes.Contains(data, []byte(line+"\n")) {
		t.Fatalf("the recording lacks %s:\n%s", line, data)
	}

	dec := NewDecoder("probe.gputop", bytes.NewReader(data))
	var got []wire.Frame
	for {
		f, err := dec.Next()
		if err != nil {
			break
		}
		got = append(got, f)
	}
	sent.Type = "probe"
	if len(got) != 2 || got[1] != wire.Frame(sent) {
		t.Fatalf("decoded %#v, want the header and %#v", got, sent)
	}
	info, err := LoadReader("probe.gputop", bytes.NewReader(data), store.New(replayOptions()))
	if err != nil || info.Frames != 1 || info.Skipped != 0 {
		t.Fatalf("loaded %d frames, skipped %d (err %v); want the probe loaded", info.Frames, info.Skipped, err)
	}

	hdr := string(data[:bytes.IndexByte(data, '\n')+1])
	for _, c := range []struct{ line, want string }{
		{fmt.Sprintf(`{"type":"probe","t":%d}`, sent.T), `probe frame without the required field "note"`},
		{`{"type":"probe","note":"x"}`, `probe frame without the required field "t"`},
		{fmt.Sprintf(`{"type":"probe","t":%d,"note":""}`, sent.T), `probe frame: "note" is empty`},
		{fmt.Sprintf(`{"type":"probe","t":%d,"note":7}`, sent.T), `probe frame: field "note"`},
	} {
		_, err := LoadReader("bad.gputop", strings.NewReader(hdr+c.line+"\n"), store.New(replayOptions()))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one saying %s", c.line, err, c.want)
		}
	}

	// the table is the authority: without the entry, the line is skipped
	wire.Unregister("probe")
	info, err = LoadReader("probe.gputop", bytes.NewReader(data), store.New(replayOptions()))
	if err != nil || info.Skipped != 1 {
		t.Fatalf("without the entry: skipped %d (err %v), want the probe skipped", info.Skipped, err)
	}
}
