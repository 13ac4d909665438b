package agentlink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/gputop/gputop/wire"
)

// decodeFrame decodes and checks one line (without its newline) of the agent
// protocol. It returns a wire value (wire.Hello, wire.Sample, wire.Mark,
// wire.OOM, wire.Holders, wire.Bye, wire.Snap, wire.Reply or wire.Request),
// or an error that names what is wrong. Where a frame may appear in a
// connection is the session's business, not this function's.
//
// Unknown fields are ignored so that a newer agent can add optional fields
// without breaking an older gputop; anything else that cannot be used is an
// error rather than a silently zeroed value.
func decodeFrame(line []byte) (any, error) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil, errors.New("empty line")
	}
	if trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return nil, syntaxError(json.Unmarshal(trimmed, new(any)))
		}
		return nil, errors.New("frame is not a JSON object")
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(trimmed, &head); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// Syntax is checked before types, so the line is valid JSON here.
			return nil, fmt.Errorf("%q must be a string, got %s", "type", te.Value)
		}
		return nil, syntaxError(err)
	}
	switch head.Type {
	case "":
		return nil, errors.New(`frame has no "type"`)
	case wire.TypeHello:
		return decodeAs[wire.Hello](trimmed, head.Type, checkHello)
	case wire.TypeSample:
		return decodeAs[wire.Sample](trimmed, head.Type, func(s *wire.Sample) error {
			return firstErr(checkTime(s.T), checkDev("dev", s.Dev))
		})
	case wire.TypeMark:
		return decodeAs[wire.Mark](trimmed, head.Type, checkMark)
	case wire.TypeOOM:
		return decodeAs[wire.OOM](trimmed, head.Type, func(o *wire.OOM) error {
			return firstErr(checkTime(o.T), checkDev("dev", o.Dev))
		})
	case wire.TypeHolders:
		return decodeAs[wire.Holders](trimmed, head.Type, func(h *wire.Holders) error {
			if h.ID < 0 {
				return fmt.Errorf(`"id" must be >= 0, got %d`, h.ID)
			}
			return firstErr(checkTime(h.T), checkDev("dev", h.Dev))
		})
	case wire.TypeBye:
		return decodeAs[wire.Bye](trimmed, head.Type, func(b *wire.Bye) error { return checkTime(b.T) })
	case wire.TypeSnap:
		return decodeAs[wire.Snap](trimmed, head.Type, func(s *wire.Snap) error {
			if err := checkVersion(s.V); err != nil {
				return err
			}
			if strings.TrimSpace(s.Label) == "" {
				return errors.New(`"label" is empty`)
			}
			return nil
		})
	case wire.TypeReply:
		return decodeAs[wire.Reply](trimmed, head.Type, func(*wire.Reply) error { return nil })
	case wire.TypeRequest:
		return decodeAs[wire.Request](trimmed, head.Type, func(r *wire.Request) error {
			if r.What == "" {
				return errors.New(`"what" is empty`)
			}
			if r.ID <= 0 {
				return fmt.Errorf(`"id" must be > 0, got %d`, r.ID)
			}
			return nil
		})
	case wire.TypeRecording, wire.TypeDevice, wire.TypeNVML, wire.TypeProcs,
		wire.TypeDevError, wire.TypeSnapshot, wire.TypeEnded:
		return nil, fmt.Errorf("frame type %q belongs in recordings, not on the agent socket", head.Type)
	}
	return nil, fmt.Errorf("unknown frame type %q", clip(head.Type, 40))
}

// decodeAs unmarshals a frame of a known type and runs its check. Errors are
// prefixed with the frame type so that "sample: ..." tells where to look.
func decodeAs[T any](line []byte, typ string, check func(*T) error) (any, error) {
	var v T
	if err := json.Unmarshal(line, &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %q must be %s, got %s", typ, te.Field, kindName(te.Type), te.Value)
		}
		return nil, fmt.Errorf("%s: %w", typ, syntaxError(err))
	}
	if err := check(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	return v, nil
}

func syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	return fmt.Errorf("not valid JSON: %v", err)
}

// kindName says in words what a Go type accepts in JSON.
func kindName(t reflect.Type) string {
	if t == nil {
		return "something else"
	}
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an unsigned integer"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

func checkVersion(v int) error {
	if v == 0 {
		return errors.New(`"v" (protocol version) is missing`)
	}
	if v != wire.Version {
		return fmt.Errorf("protocol version %d is not supported (this gputop speaks version %d)", v, wire.Version)
	}
	return nil
}

func checkTime(t int64) error {
	if t <= 0 {
		return fmt.Errorf(`"t" must be > 0 (ns since the epoch), got %d`, t)
	}
	return nil
}

func checkDev(field string, dev int) error {
	if dev < 0 {
		return fmt.Errorf("%q must be a torch device index >= 0, got %d", field, dev)
	}
	return nil
}

func checkHello(h *wire.Hello) error {
	if err := checkVersion(h.V); err != nil {
		return err
	}
	if h.PID <= 0 {
		return fmt.Errorf(`"pid" must be > 0, got %d`, h.PID)
	}
	if err := checkTime(h.T); err != nil {
		return err
	}
	if h.RateHz < 0 {
		return fmt.Errorf(`"rate_hz" must be >= 0, got %g`, h.RateHz)
	}
	seen := map[int]bool{}
	uuids := map[string]int{}
	for i, d := range h.Devices {
		if d.Index < 0 {
			return fmt.Errorf("devices[%d]: \"index\" must be >= 0, got %d", i, d.Index)
		}
		if d.UUID == "" {
			// Without a UUID the torch index cannot be tied to an NVML device,
			// and CUDA_VISIBLE_DEVICES would silently mislabel it.
			return fmt.Errorf("devices[%d] (cuda:%d) has no \"uuid\"", i, d.Index)
		}
		if seen[d.Index] {
			return fmt.Errorf("cuda:%d is listed twice in \"devices\"", d.Index)
		}
		seen[d.Index] = true
		// two torch devices cannot be one GPU; their samples would mix in
		// one series in an order a recording could not keep
		if j, dup := uuids[d.UUID]; dup {
			return fmt.Errorf("cuda:%d and cuda:%d have the same \"uuid\" %q", j, d.Index, clip(d.UUID, 60))
		}
		uuids[d.UUID] = d.Index
	}
	return nil
}

func checkMark(m *wire.Mark) error {
	if err := checkTime(m.T); err != nil {
		return err
	}
	if strings.TrimSpace(m.Label) == "" {
		return errors.New(`"label" is empty`)
	}
	switch m.Kind {
	case "", wire.MarkSnapshot, wire.MarkPhaseStart, wire.MarkPhaseEnd:
	default:
		return fmt.Errorf("unknown kind %q (want %q, %q or %q)", clip(m.Kind, 40),
			wire.MarkSnapshot, wire.MarkPhaseStart, wire.MarkPhaseEnd)
	}
	for i, d := range m.Devs {
		if err := checkDev(fmt.Sprintf("devs[%d].dev", i), d.Dev); err != nil {
			return err
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// clip keeps a peer-chosen string short enough for a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// encodeLine writes a frame in the protocol's canonical form: Go's field
// order, no spaces, UTF-8 left as is (no HTML escaping), one "\n" at the end.
func encodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
