package wire

import "math"

// A sample frame is the agent's most frequent line (one per device at its
// rate, 100 a second by default, up to 1000), and encoding/json spent 11 µs
// and 14 allocations on each (the type read first, then the frame by
// reflection). The agent writes it in one form (_wire.py's sample_line:
// the fields in Sample's order, integers, no spaces); DecodeSample reads
// that form, in any field order, without allocating, and leaves everything
// else to encoding/json. decode_test.go and its fuzz test hold it to
// json.Unmarshal: what it accepts, encoding/json decodes to the same Sample.

// DecodeSample decodes line, a whole JSON object with no space in it,
// whose "type" is "sample" and whose other fields are Sample's, each an
// integer in its field's range and given once. ok is false for anything
// else (a field it does not know, a space, a fraction, a null), which
// encoding/json then decodes, or refuses with its reason.
func DecodeSample(line []byte) (s Sample, ok bool) {
	n := len(line)
	if n < 2 || line[0] != '{' || line[n-1] != '}' {
		return Sample{}, false
	}
	var seen uint16
	i := 1
	for {
		// "key":
		if i >= n || line[i] != '"' {
			return Sample{}, false
		}
		j := i + 1
		for j < n && line[j] != '"' {
			if c := line[j]; !(c >= 'a' && c <= 'z' || c == '_') {
				return Sample{}, false // an escape, a capital: encoding/json's
			}
			j++
		}
		if j+1 >= n || line[j+1] != ':' {
			return Sample{}, false
		}
		f := sampleField(line[i+1 : j])
		if f < 0 || seen&(1<<f) != 0 {
			return Sample{}, false
		}
		seen |= 1 << f
		i = j + 2
		if f == fieldType {
			const v = `"` + TypeSample + `"`
			if n-i < len(v) || string(line[i:i+len(v)]) != v {
				return Sample{}, false
			}
			i += len(v)
		} else {
			neg := i < n && line[i] == '-'
			if neg {
				i++
			}
			start := i
			var u uint64
			for i < n && line[i] >= '0' && line[i] <= '9' {
				d := uint64(line[i] - '0')
				if u > (1<<64-1-d)/10 {
					return Sample{}, false // past uint64: encoding/json says so
				}
				u = u*10 + d
				i++
			}
			if i == start || i-start > 1 && line[start] == '0' {
				return Sample{}, false // no digits, or a leading zero
			}
			if !s.set(f, u, neg) {
				return Sample{}, false
			}
		}
		switch {
		case i == n-1:
			if seen&(1<<fieldType) == 0 {
				return Sample{}, false
			}
			s.Type = TypeSample
			return s, true
		case line[i] == ',':
			i++
		default:
			return Sample{}, false
		}
	}
}

const (
	fieldType = iota
	fieldPID
	fieldT
	fieldDev
	fieldAllocated
	fieldReserved
	fieldPeak
	fieldReservedPeak
	fieldInactive
	fieldAllocRetries
	fieldOOMs
	fieldDropped
)

func sampleField(name []byte) int {
	switch string(name) { // no allocation: the compiler compares in place
	case "type":
		return fieldType
	case "pid":
		return fieldPID
	case "t":
		return fieldT
	case "dev":
		return fieldDev
	case "allocated":
		return fieldAllocated
	case "reserved":
		return fieldReserved
	case "peak":
		return fieldPeak
	case "reserved_peak":
		return fieldReservedPeak
	case "inactive":
		return fieldInactive
	case "alloc_retries":
		return fieldAllocRetries
	case "ooms":
		return fieldOOMs
	case "dropped":
		return fieldDropped
	}
	return -1
}

// set stores the integer (neg: its negative) in field f, false where it
// does not fit the field (encoding/json refuses those).
func (s *Sample) set(f int, u uint64, neg bool) bool {
	switch f {
	case fieldPID, fieldT, fieldDev:
		limit := uint64(math.MaxInt)
		if f == fieldT {
			limit = math.MaxInt64
		}
		if neg {
			limit++ // the least int is one further from 0
		}
		if u > limit {
			return false
		}
		v := int64(u) // -1<<63 when u is 1<<63: negated below, the same
		if neg {
			v = -v
		}
		switch f {
		case fieldPID:
			s.PID = int(v)
		case fieldT:
			s.T = v
		default:
			s.Dev = int(v)
		}
		return true
	}
	if neg {
		return false // an unsigned field: encoding/json refuses a sign
	}
	switch f {
	case fieldAllocated:
		s.Allocated = u
	case fieldReserved:
		s.Reserved = u
	case fieldPeak:
		s.Peak = u
	case fieldReservedPeak:
		s.ReservedPeak = u
	case fieldInactive:
		s.Inactive = u
	case fieldAllocRetries:
		s.AllocRetries = u
	case fieldOOMs:
		s.OOMs = u
	default:
		s.Dropped = u
	}
	return true
}
