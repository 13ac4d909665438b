package wire

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

//go:generate go test -run TestPythonSchemaIsCurrent -update-schema .

var updateSchema = flag.Bool("update-schema", false, "rewrite agent/gputop/_wire_schema.py from the frame table (schema.go)")

const pySchemaPath = "../agent/gputop/_wire_schema.py"

// pyKind is the Python encoder's kind of a Go field type (see _wire.py).
func pyKind(t reflect.Type) (kind string, sub reflect.Type) {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "i", nil
	case reflect.Float64:
		return "f", nil
	case reflect.String:
		return "s", nil
	case reflect.Bool:
		return "b", nil
	case reflect.Slice:
		switch e := t.Elem(); e.Kind() {
		case reflect.String:
			return "ls", nil
		case reflect.Int64:
			return "li", nil
		case reflect.Struct:
			return "L", e
		}
	case reflect.Pointer:
		switch e := t.Elem(); e.Kind() {
		case reflect.Int, reflect.Uint64:
			return "p", nil
		case reflect.Bool:
			return "pb", nil
		case reflect.Struct:
			return "O", e
		case reflect.Slice:
			if e.Elem().Kind() == reflect.Struct {
				return "pL", e.Elem()
			}
		}
	}
	panic(fmt.Sprintf("no Python kind for %v", t))
}

var wordStart = regexp.MustCompile(`([a-z])([A-Z])`)

// pyName is a nested struct's schema name: AgentDevice -> AGENT_DEVICE.
func pyName(t reflect.Type) string {
	return strings.ToUpper(wordStart.ReplaceAllString(t.Name(), "${1}_${2}"))
}

// pythonSchema is agent/gputop/_wire_schema.py: the schema of each frame
// type of the table, and of the structs inside them, each before its use.
func pythonSchema() string {
	var b strings.Builder
	b.WriteString(`"""The frames' schemas, written from wire/schema.go's table and the structs
of wire/frames.go by ` + "`go generate ./wire`" + `; do not edit (a Go test fails
while this file is stale).

A field is (json key, kind, omitempty, nested schema): see _wire.py.
"""

`)
	done := map[reflect.Type]bool{}
	var fieldsOf func(t reflect.Type, indent string) string
	var nested func(t reflect.Type)
	fieldsOf = func(t reflect.Type, indent string) string {
		var s strings.Builder
		s.WriteString("(\n")
		for _, f := range Fields(t) {
			kind, sub := pyKind(f.Type)
			subName := "None"
			if sub != nil {
				subName = pyName(sub)
			}
			omit := "False"
			if f.OmitEmpty {
				omit = "True"
			}
			fmt.Fprintf(&s, "%s    (%q, %q, %s, %s),\n", indent, f.Name, kind, omit, subName)
		}
		s.WriteString(indent + ")")
		return s.String()
	}
	nested = func(t reflect.Type) {
		for _, f := range Fields(t) {
			if _, sub := pyKind(f.Type); sub != nil && !done[sub] {
				done[sub] = true
				nested(sub)
				fmt.Fprintf(&b, "%s = %s\n", pyName(sub), fieldsOf(sub, ""))
			}
		}
	}
	for _, s := range Frames {
		nested(s.GoType())
	}
	b.WriteString("\n# One schema per frame type, in wire/frames.go field order.\nSCHEMAS: dict[str, tuple] = {\n")
	for _, s := range Frames {
		fmt.Fprintf(&b, "    %q: %s,\n", s.Type, fieldsOf(s.GoType(), "    "))
	}
	b.WriteString("}\n")
	return b.String()
}

// TestPythonSchemaIsCurrent holds agent/gputop/_wire_schema.py to the
// frame table; go generate ./wire rewrites it.
func TestPythonSchemaIsCurrent(t *testing.T) {
	want := pythonSchema()
	if *updateSchema {
		if err := os.WriteFile(pySchemaPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(pySchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go generate ./wire", pySchemaPath)
	}
}
