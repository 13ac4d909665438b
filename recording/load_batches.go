// Sample batches, NVML's and the agents': checked whole, then ingested
// sample by sample; NVML's parsed without encoding/json (most of a file).

package recording

import (
	"errors"
	"fmt"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// samples checks a whole agent sample batch, then ingests its samples one
// by one, as they came from the agent; a bad batch adds none.
func (l *loader) samples(f *wire.Samples) error {
	if f.PID <= 0 {
		return fmt.Errorf("pid %d is not a process id", f.PID)
	}
	n := len(f.DT)
	if n == 0 {
		return errors.New("empty batch (dt has no samples)")
	}
	lists := f.Lists()
	for i, p := range lists {
		if len(*p) != n && (i < 3 || len(*p) != 0) {
			return fmt.Errorf("dt has %d samples but %s has %d", n, wire.SampleLists[i], len(*p))
		}
	}
	if err := l.checkSteps(f.T0, f.DT); err != nil {
		return err
	}
	t := f.T0
	var c [8]uint64
	for i, d := range f.DT {
		t += d
		for j, p := range lists {
			if len(*p) != 0 {
				c[j] += uint64((*p)[i])
			}
		}
		smp := wire.Sample{Type: wire.TypeSample, T: t, Dev: f.Dev}
		smp.SetCounters(c)
		l.span(t)
		// a batch is the recording's encoding of sample frames: each goes in
		// as one (straight to the store, as ingest.Apply would: a batch holds
		// thousands, and handing each over as a wire.Frame would allocate)
		l.st.AgentSample(f.PID, smp)
	}
	return nil
}

// nvml decodes a batch line with encoding/json.
func (l *loader) nvml(body []byte) error {
	var f wire.NVML
	if err := decodeJSON(body, &f); err != nil {
		return err
	}
	return l.addBatch(&f)
}

// checkSteps checks a batch's first time and each sample's time.
func (l *loader) checkSteps(t0 int64, dt []int64) error {
	if err := l.checkTime(t0); err != nil {
		return err
	}
	t := t0
	for i, d := range dt {
		// bound each step first so t+d cannot overflow
		if d < -maxAfter-maxBefore || d > maxAfter+maxBefore {
			return fmt.Errorf("dt[%d] = %d is not a plausible step", i, d)
		}
		t += d
		if err := l.checkTime(t); err != nil {
			return fmt.Errorf("sample %d: %v", i, err)
		}
	}
	return nil
}

// addBatch checks a whole batch, then adds its samples; a bad batch adds
// none.
func (l *loader) addBatch(f *wire.NVML) error {
	if err := l.checkDev(f.Dev); err != nil {
		return err
	}
	n := len(f.DT)
	switch {
	case n == 0:
		return errors.New("empty batch (dt has no samples)")
	case len(f.Used) != n:
		return fmt.Errorf("dt has %d samples but used has %d", n, len(f.Used))
	case len(f.Reserved) != 0 && len(f.Reserved) != n:
		return fmt.Errorf("dt has %d samples but reserved has %d", n, len(f.Reserved))
	}
	if err := l.checkSteps(f.T0, f.DT); err != nil {
		return err
	}
	t := f.T0
	var used, res uint64
	for i, d := range f.DT {
		t += d
		used += uint64(f.Used[i])
		if len(f.Reserved) != 0 {
			res += uint64(f.Reserved[i])
		}
		l.st.AddNVML(f.Dev, t, used, res)
		l.span(t)
	}
	l.info.Samples += int64(n)
	if l.rates == nil {
		l.rates = map[int]*rate{}
	}
	r := l.rates[f.Dev]
	if r == nil {
		r = &rate{first: f.T0 + f.DT[0]}
		l.rates[f.Dev] = r
	}
	r.n += int64(n)
	r.last = max(r.last, t)
	l.nvmlSeen(f.Dev)
	return nil
}

var batchPrefix = []byte(`{"type":"nvml","dev":`)

// parseBatch parses a batch line in exactly the form the Writer writes
// (wire.NVML's AppendJSON): no spaces, fields in order, integers without leading
// zeros. It reports false for anything else, which is then decoded by
// encoding/json, so it never accepts a line encoding/json would read
// differently. f's slices are reused.
func parseBatch(b []byte, f *wire.NVML) bool {
	p := batchParser{b: b}
	var dev int64
	ok := p.lit(`{"type":"nvml","dev":`) && p.int(&dev) && dev >= 0 && dev < store.MaxDevices &&
		p.lit(`,"t0":`) && p.int(&f.T0) &&
		p.lit(`,"dt":`) && p.ints(&f.DT) &&
		p.lit(`,"used":`) && p.ints(&f.Used)
	if !ok {
		return false
	}
	f.Type, f.Dev = wire.TypeNVML, int(dev)
	f.Reserved = f.Reserved[:0]
	if p.lit(`,"reserved":`) && !p.ints(&f.Reserved) {
		return false
	}
	return p.lit("}") && p.i == len(b)
}

type batchParser struct {
	b []byte
	i int
}

func (p *batchParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// int parses 0 or -?[1-9][0-9]* within int64.
func (p *batchParser) int(x *int64) bool {
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var u uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if p.i-start >= 19 { // 19 digits always fit in a uint64
			return false
		}
		u = u*10 + uint64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	switch {
	case n == 0, n > 1 && p.b[start] == '0', neg && u == 0:
		return false
	case !neg && u > 1<<63-1, neg && u > 1<<63:
		return false
	}
	if neg {
		*x = -int64(u-1) - 1 // no overflow at -1<<63
	} else {
		*x = int64(u)
	}
	return true
}

func (p *batchParser) ints(xs *[]int64) bool {
	*xs = (*xs)[:0]
	if !p.lit("[") {
		return false
	}
	if p.lit("]") {
		return true
	}
	for {
		var x int64
		if !p.int(&x) {
			return false
		}
		*xs = append(*xs, x)
		if p.lit("]") {
			return true
		}
		if !p.lit(",") {
			return false
		}
	}
}
