package wire

import "strconv"

// The two batch frames are most of a recording's lines (one per device and
// per agent device every 100 ms), so the recorder encodes them with these
// instead of encoding/json: the same bytes json.Marshal gives (field order,
// omitempty, no spaces), without allocating. encode_test.go holds them to
// json.Marshal.

// AppendJSON appends n's JSON encoding to buf. The type field is always
// TypeNVML.
func (n *NVML) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"type":"`+TypeNVML+`","dev":`...)
	buf = strconv.AppendInt(buf, int64(n.Dev), 10)
	buf = append(buf, `,"t0":`...)
	buf = strconv.AppendInt(buf, n.T0, 10)
	buf = appendList(buf, "dt", n.DT, false)
	buf = appendList(buf, "used", n.Used, false)
	buf = appendList(buf, "reserved", n.Reserved, true)
	return append(buf, '}')
}

// AppendJSON appends s's JSON encoding to buf. The type field is always
// TypeSamples.
func (s *Samples) AppendJSON(buf []byte) []byte {
	buf = append(buf, `{"type":"`+TypeSamples+`","pid":`...)
	buf = strconv.AppendInt(buf, int64(s.PID), 10)
	buf = append(buf, `,"dev":`...)
	buf = strconv.AppendInt(buf, int64(s.Dev), 10)
	buf = append(buf, `,"t0":`...)
	buf = strconv.AppendInt(buf, s.T0, 10)
	buf = appendList(buf, "dt", s.DT, false)
	for i, l := range s.Lists() {
		buf = appendList(buf, SampleLists[i], *l, i >= 3)
	}
	return append(buf, '}')
}

// SampleLists names Samples' counter lists in Sample.Counters' order; the
// first three are required, the others optional (omitempty).
var SampleLists = [8]string{"allocated", "reserved", "peak", "reserved_peak", "inactive", "alloc_retries", "ooms", "dropped"}

// appendList appends `,"name":[x,y,...]`; with omitEmpty an empty list is
// left out, as encoding/json's omitempty does, and a nil required list is
// written as null, as encoding/json does.
func appendList(buf []byte, name string, xs []int64, omitEmpty bool) []byte {
	if omitEmpty && len(xs) == 0 {
		return buf
	}
	buf = append(append(append(buf, `,"`...), name...), `":`...)
	if xs == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, x := range xs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, x, 10)
	}
	return append(buf, ']')
}
