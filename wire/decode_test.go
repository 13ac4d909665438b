package wire

import (
	"encoding/json"
	"testing"
)

var sampleLines = []string{
	// the agent's form (_wire.py's sample_line), with and without its optional fields
	`{"type":"sample","t":1767225600030000000,"dev":0,"allocated":16785408,"reserved":41943040,"peak":25174016}`,
	`{"type":"sample","t":1767225600030000000,"dev":3,"allocated":16785408,"reserved":41943040,"peak":25174016,"reserved_peak":41943040,"inactive":8388608,"alloc_retries":2,"ooms":1,"dropped":7}`,
	`{"dev":1,"peak":3,"type":"sample","t":5,"allocated":1,"reserved":2,"pid":9}`,
	`{"type":"sample","t":-5,"dev":-1,"allocated":0,"reserved":0,"peak":18446744073709551615}`,
	`{"type":"sample","t":-9223372036854775808,"dev":0,"allocated":0,"reserved":0,"peak":0}`,
	`{"type":"sample","t":-0,"dev":0,"allocated":0,"reserved":0,"peak":0}`,
	`{"type":"sample"}`,
}

// what DecodeSample leaves to encoding/json
var notSampleLines = []string{
	`{"type": "sample","t":1,"dev":0,"allocated":1,"reserved":1,"peak":1}`,  // a space
	`{"type":"sample","t":1,"dev":0,"allocated":1.5,"reserved":1,"peak":1}`, // a fraction
	`{"type":"sample","t":1,"dev":0,"allocated":1e3,"reserved":1,"peak":1}`,
	`{"type":"sample","t":1,"dev":0,"allocated":-1,"reserved":1,"peak":1}`, // a sign on an unsigned field
	`{"type":"sample","t":1,"dev":0,"allocated":18446744073709551616,"reserved":1,"peak":1}`,
	`{"type":"sample","t":9223372036854775808,"dev":0,"allocated":1,"reserved":1,"peak":1}`,
	`{"type":"sample","t":01,"dev":0,"allocated":1,"reserved":1,"peak":1}`,
	`{"type":"sample","t":1,"t":2,"dev":0,"allocated":1,"reserved":1,"peak":1}`, // a field twice
	`{"type":"sample","t":1,"dev":0,"allocated":null,"reserved":1,"peak":1}`,
	`{"type":"sample","t":1,"dev":0,"allocated":"1","reserved":1,"peak":1}`,
	`{"type":"sample","t":1,"dev":0,"future":1,"reserved":1,"peak":1}`, // a field it does not know
	`{"type":"sample","t":1,"dev":0,"Allocated":1,"reserved":1,"peak":1}`,
	`{"type":"sample","t":1,"dev":0,"alloc\u0061ted":1,"reserved":1,"peak":1}`,
	`{"type":"samples","t":1,"dev":0,"allocated":1,"reserved":1,"peak":1}`,
	`{"type":"sample","t":1,}`,
	`{"type":"sample"}}`,
	`{"t":1,"dev":0,"allocated":1,"reserved":1,"peak":1}`,
	`{}`, `{`, `}`, ``, `[1]`, `{"type":"sample","t":}`, `{"type":"sample","t":-}`,
}

func TestDecodeSampleIsEncodingJSONs(t *testing.T) {
	for _, l := range sampleLines {
		got, ok := DecodeSample([]byte(l))
		if !ok {
			t.Errorf("%s: not decoded", l)
			continue
		}
		var want Sample
		if err := json.Unmarshal([]byte(l), &want); err != nil || got != want {
			t.Errorf("%s:\n got %+v\nwant %+v (%v)", l, got, want, err)
		}
	}
	for _, l := range notSampleLines {
		if s, ok := DecodeSample([]byte(l)); ok {
			t.Errorf("%s: decoded as %+v; encoding/json's to decode or refuse", l, s)
		}
	}
}

// The agent's sample line costs no allocation (encoding/json: 14).
func TestDecodeSampleAllocatesNothing(t *testing.T) {
	line := []byte(sampleLines[1])
	if n := testing.AllocsPerRun(100, func() { DecodeSample(line) }); n != 0 {
		t.Errorf("%v allocations a sample", n)
	}
}

// Whatever DecodeSample decodes, encoding/json decodes to the same Sample.
func FuzzDecodeSample(f *testing.F) {
	for _, l := range append(sampleLines, notSampleLines...) {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := DecodeSample(line)
		if !ok {
			return
		}
		var want Sample
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("%q: decoded as %+v, encoding/json refuses it: %v", line, got, err)
		}
		if want.Type != TypeSample || got != want {
			t.Fatalf("%q:\n got %+v\nwant %+v", line, got, want)
		}
	})
}
