// Sample batches, NVML's and the agents': checked whole, then ingested
// sample by sample (Ingest.Apply); NVML's parsed without encoding/json
// (most of a file).

package recording

import (
	"errors"
	"fmt"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// checkSamples checks a whole agent sample batch: a bad batch adds none.
func (d *Decoder) checkSamples(f *wire.Samples) error {
	if f.PID <= 0 {
		return fmt.Errorf("pid %d is not a process id", f.PID)
	}
	n := len(f.DT)
	if n == 0 {
		return errors.New("empty batch (dt has no samples)")
	}
	for i, p := range f.Lists() {
		if len(*p) != n && (i < 3 || len(*p) != 0) {
			return fmt.Errorf("dt has %d samples but %s has %d", n, wire.SampleLists[i], len(*p))
		}
	}
	return d.checkSteps(f.T0, f.DT)
}

// checkSteps checks a batch's first time and each sample's time.
func (d *Decoder) checkSteps(t0 int64, dt []int64) error {
	if err := d.checkTime(t0); err != nil {
		return err
	}
	t := t0
	for i, step := range dt {
		// bound each step first so t+step cannot overflow
		if step < -maxAfter-maxBefore || step > maxAfter+maxBefore {
			return fmt.Errorf("dt[%d] = %d is not a plausible step", i, step)
		}
		t += step
		if err := d.checkTime(t); err != nil {
			return fmt.Errorf("sample %d: %v", i, err)
		}
	}
	t = t0
	for _, step := range dt {
		t += step
		d.span(t)
	}
	return nil
}

// checkBatch checks a whole NVML batch: a bad batch adds none.
func (d *Decoder) checkBatch(f *wire.NVML) error {
	if err := d.checkDev(f.Dev); err != nil {
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
	return d.checkSteps(f.T0, f.DT)
}

// addBatch adds a checked NVML batch and notes the device's achieved rate.
func (l *loader) addBatch(f wire.NVML) {
	l.in.Apply(0, f)
	n := len(f.DT)
	t := f.T0
	for _, step := range f.DT {
		t += step
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
