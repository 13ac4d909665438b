package agentlink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/gputop/gputop/wire"
)

// decodeFrame decodes and checks one line (without its newline) of the agent
// protocol. It returns a wire value of a type that the table (wire.Frames)
// puts on the socket, or an error that names what is wrong. Where a frame may appear in a
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
	if s, ok := wire.DecodeSample(trimmed); ok { // the agent's sample line, without encoding/json
		var f wire.Frame = s // boxed once, for the check and the caller
		if err := wire.Check(f); err != nil {
			return nil, fmt.Errorf("%s: %w", wire.TypeSample, err)
		}
		return f, nil
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
	if head.Type == "" {
		return nil, errors.New(`frame has no "type"`)
	}
	spec, known := wire.Lookup(head.Type)
	switch {
	case !known:
		return nil, fmt.Errorf("unknown frame type %q", wire.Clip(head.Type, 40))
	case spec.Socket == wire.NotOnSocket:
		return nil, fmt.Errorf("frame type %q belongs in recordings, not on the agent socket", head.Type)
	}
	return decodeAs(spec, trimmed)
}

// decodeAs unmarshals a frame of a known type and checks it (wire.Check,
// which the recording loader uses too). Errors are prefixed with the frame
// type so that "sample: ..." tells where to look.
func decodeAs(spec wire.Spec, line []byte) (any, error) {
	typ := spec.Type
	p := spec.New()
	if err := json.Unmarshal(line, p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %q must be %s, got %s", typ, te.Field, kindName(te.Type), te.Value)
		}
		return nil, fmt.Errorf("%s: %w", typ, syntaxError(err))
	}
	v := spec.Value(p)
	if err := wire.Check(v); err != nil {
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
