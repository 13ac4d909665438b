package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

// Peak lines from outside keep the wire's bound: the 8 largest lines, the
// rest counted in More and MoreLines (with what the agent counted
// already); names made printable and held to 256 bytes.
func TestPeakLinesBounded(t *testing.T) {
	var lines []wire.PeakLine
	for i := range 12 {
		lines = append(lines, wire.PeakLine{File: fmt.Sprintf("f%d.py\x1b[2J", i), Line: i, Func: strings.Repeat("x", 1000), Bytes: uint64(i+1) << 20, Blocks: 1})
	}
	st := New(DefaultOptions())
	st.SetDevice(Device{Index: 0, UUID: "GPU-a", Name: "H200", Total: 100 << 30, Source: "nvml"})
	st.AgentHello(wire.Hello{Type: wire.TypeHello, V: 1, PID: 42, Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-a", Name: "H200", Total: 100 << 30}}, T: 1})
	rows := st.AgentMark(42, wire.Mark{Type: wire.TypeMark, T: 2, Label: "step", Devs: []wire.DevStats{{Dev: 0, Allocated: 1, Reserved: 2, Peak: 3,
		PeakLines: &wire.PeakLines{T: 2, Allocated: 100 << 20, Lines: lines, MoreLines: 2, More: 5 << 20}}}})
	if len(rows) != 1 || rows[0].PeakLines == nil {
		t.Fatalf("rows %+v", rows)
	}
	p := rows[0].PeakLines
	if len(p.Lines) != wire.MaxPeakLines || p.Lines[0].Bytes != 12<<20 || p.Lines[7].Bytes != 5<<20 {
		t.Fatalf("lines %+v, want the 8 largest, largest first", p.Lines)
	}
	if p.MoreLines != 2+4 || p.More != (5+1+2+3+4)<<20 {
		t.Errorf("more %d in %d lines, want the agent's 2 and the 4 cut", p.More, p.MoreLines)
	}
	for _, l := range p.Lines {
		if strings.ContainsRune(l.File, '\x1b') || len(l.Func) > wire.MaxSettingBytes {
			t.Errorf("a line kept %q / %d bytes of function name", l.File, len(l.Func))
		}
	}
	if lines[0].File != "f0.py\x1b[2J" {
		t.Error("the sender's lines were changed in place")
	}
}
