// What a recording's line must hold to load: the fields each frame type
// needs, the frame's own checks (wire.Check), and times and devices in range.

package recording

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

func init() {
	wire.Register(wire.FrameOf[Dropped](wire.Spec{Type: TypeDropped, Recorded: true, Own: true,
		Doc: "what the recorder could not write since its previous `dropped` line (below; the recorder's own, `recording.Dropped`)"}, nil))
}

// presence records which fields a line has, so a required field that is
// missing is an error instead of a silent zero: a struct of "type" and a
// json.RawMessage (which only scans) for each field some frame type of
// the table (wire.All) requires, made again when the table changes.
type presence struct {
	typ        reflect.Type
	index      map[string]int // field name -> struct field
	generation int
}

var presenceCache atomic.Pointer[presence]

func currentPresence() *presence {
	gen := wire.Generation()
	if p := presenceCache.Load(); p != nil && p.generation == gen {
		return p
	}
	p := &presence{index: map[string]int{}, generation: gen}
	fields := []reflect.StructField{{Name: "Type", Type: reflect.TypeFor[*string](), Tag: `json:"type"`}}
	for _, s := range wire.All() {
		for _, f := range s.Required() {
			if _, seen := p.index[f.Name]; !seen {
				p.index[f.Name] = len(fields)
				fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", len(fields)),
					Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(fmt.Sprintf("json:%q", f.Name))})
			}
		}
	}
	p.typ = reflect.StructOf(fields)
	presenceCache.Store(p)
	return p
}

// decodeJSON unmarshals and words errors for people.
func decodeJSON(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at column %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Errorf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("want a JSON object, got JSON %s", te.Value)
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// checkTime keeps times near the header's start (see maxBefore, maxAfter).
func (d *Decoder) checkTime(t int64) error {
	s := d.hdr.Start
	if t < s-maxBefore || t > s+maxAfter {
		return fmt.Errorf("time %d is not within %v before to %v after the recording's start %d",
			t, time.Duration(maxBefore), time.Duration(maxAfter), s)
	}
	return nil
}

// span notes the times decoded.
func (d *Decoder) span(t int64) {
	if d.Start == 0 || t < d.Start {
		d.Start = t
	}
	if t > d.End {
		d.End = t
	}
}

func (d *Decoder) checkDev(dev int) error {
	if dev < 0 || dev >= store.MaxDevices {
		return fmt.Errorf("device index %d out of range 0..%d", dev, store.MaxDevices-1)
	}
	return nil
}

func (d *Decoder) check(dev int, t int64) error {
	if err := d.checkDev(dev); err != nil {
		return err
	}
	if err := d.checkTime(t); err != nil {
		return err
	}
	d.span(t)
	return nil
}

func (d *Decoder) checkAgent(pid int, t int64) error {
	if pid <= 0 {
		return fmt.Errorf("pid %d is not a process id", pid)
	}
	if err := d.checkTime(t); err != nil {
		return err
	}
	d.span(t)
	return nil
}
