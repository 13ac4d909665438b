// What a recording's line must hold to load: the fields each frame type
// needs, the frame's own checks (wire.Check), and times and devices in range.

package recording

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// presence records which fields a line has, so a required field that is
// missing is an error instead of a silent zero. RawMessage only scans.
type presence struct {
	Type      *string         `json:"type"`
	V         json.RawMessage `json:"v"`
	Start     json.RawMessage `json:"start"`
	Index     json.RawMessage `json:"index"`
	UUID      json.RawMessage `json:"uuid"`
	Name      json.RawMessage `json:"name"`
	Total     json.RawMessage `json:"total"`
	Dev       json.RawMessage `json:"dev"`
	T0        json.RawMessage `json:"t0"`
	DT        json.RawMessage `json:"dt"`
	Used      json.RawMessage `json:"used"`
	PID       json.RawMessage `json:"pid"`
	T         json.RawMessage `json:"t"`
	Procs     json.RawMessage `json:"procs"`
	Error     json.RawMessage `json:"error"`
	Devices   json.RawMessage `json:"devices"`
	Allocated json.RawMessage `json:"allocated"`
	Reserved  json.RawMessage `json:"reserved"`
	Peak      json.RawMessage `json:"peak"`
	Label     json.RawMessage `json:"label"`
	Source    json.RawMessage `json:"source"`
	Skipped   json.RawMessage `json:"skipped"`
	Groups    json.RawMessage `json:"groups"`
	Held      json.RawMessage `json:"held"`
	ID        json.RawMessage `json:"id"`
}

type field struct {
	name     string
	get      func(*presence) json.RawMessage
	nullable bool // a list that may be null (encoding/json writes nil slices so)
}

var (
	fV         = field{"v", func(p *presence) json.RawMessage { return p.V }, false}
	fStart     = field{"start", func(p *presence) json.RawMessage { return p.Start }, false}
	fIndex     = field{"index", func(p *presence) json.RawMessage { return p.Index }, false}
	fUUID      = field{"uuid", func(p *presence) json.RawMessage { return p.UUID }, false}
	fName      = field{"name", func(p *presence) json.RawMessage { return p.Name }, false}
	fTotal     = field{"total", func(p *presence) json.RawMessage { return p.Total }, false}
	fDev       = field{"dev", func(p *presence) json.RawMessage { return p.Dev }, false}
	fT0        = field{"t0", func(p *presence) json.RawMessage { return p.T0 }, false}
	fDT        = field{"dt", func(p *presence) json.RawMessage { return p.DT }, false}
	fUsed      = field{"used", func(p *presence) json.RawMessage { return p.Used }, false}
	fPID       = field{"pid", func(p *presence) json.RawMessage { return p.PID }, false}
	fT         = field{"t", func(p *presence) json.RawMessage { return p.T }, false}
	fProcs     = field{"procs", func(p *presence) json.RawMessage { return p.Procs }, true}
	fError     = field{"error", func(p *presence) json.RawMessage { return p.Error }, false}
	fDevices   = field{"devices", func(p *presence) json.RawMessage { return p.Devices }, true}
	fAllocated = field{"allocated", func(p *presence) json.RawMessage { return p.Allocated }, false}
	fReserved  = field{"reserved", func(p *presence) json.RawMessage { return p.Reserved }, false}
	fPeak      = field{"peak", func(p *presence) json.RawMessage { return p.Peak }, false}
	fLabel     = field{"label", func(p *presence) json.RawMessage { return p.Label }, false}
	fSource    = field{"source", func(p *presence) json.RawMessage { return p.Source }, false}
	fSkipped   = field{"skipped", func(p *presence) json.RawMessage { return p.Skipped }, false}
	fGroups    = field{"groups", func(p *presence) json.RawMessage { return p.Groups }, true}
	fHeld      = field{"held", func(p *presence) json.RawMessage { return p.Held }, false}
	fID        = field{"id", func(p *presence) json.RawMessage { return p.ID }, false}
)

// required lists, per frame type, the fields that must be present: those the
// wire types never omit, plus pid on agent frames (gputop fills it in).
var required = map[string][]field{
	wire.TypeRecording: {fV, fStart},
	wire.TypeDevice:    {fIndex, fUUID, fName, fTotal},
	wire.TypeNVML:      {fDev, fT0, fDT, fUsed},
	wire.TypeProcs:     {fT, fDev, fProcs},
	wire.TypeDevError:  {fT, fDev, fError},
	wire.TypeHello:     {fV, fPID, fT, fDevices},
	wire.TypeSample:    {fPID, fT, fDev, fAllocated, fReserved, fPeak},
	wire.TypeSamples:   {fPID, fDev, fT0, fDT, fAllocated, fReserved, fPeak},
	wire.TypeSnapshot:  {fT, fLabel, fDev, fSource},
	wire.TypeOOM:       {fPID, fT, fDev, fAllocated, fReserved, fPeak},
	wire.TypeHolders:   {fPID, fT, fDev, fSkipped, fGroups},
	wire.TypeBye:       {fPID, fT},
	wire.TypeEnded:     {fPID, fT},
	wire.TypeRowHeld:   {fPID, fT, fDev, fHeld},
	wire.TypeRowEdit:   {fT, fDev, fLabel},
	wire.TypeHost:      {fID, fName, fT},
	TypeDropped:        {fT},
}

// decodeChecked unmarshals a frame and checks it as the agent socket does
// (wire.Check), so a recording holds nothing a live agent could not send.
func decodeChecked[T wire.Frame](b []byte, f *T) error {
	if err := decodeJSON(b, f); err != nil {
		return err
	}
	return wire.Check(*f)
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
