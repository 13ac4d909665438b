package status

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

const schemaPath = "../docs/status.schema.json"

// node is a JSON Schema object, as much of it as this test reads.
type node struct {
	Ref        string           `json:"$ref"`
	Type       string           `json:"type"`
	Const      any              `json:"const"`
	Enum       []any            `json:"enum"`
	Items      *node            `json:"items"`
	Properties map[string]*node `json:"properties"`
	Required   []string         `json:"required"`
	AddProps   *bool            `json:"additionalProperties"`
	Defs       map[string]*node `json:"$defs"`
}

func loadSchema(t *testing.T) *node {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var root node
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return &root
}

// TestSchemaIsTheReport holds docs/status.schema.json to wire.StatusReport:
// every object of the schema has exactly the fields of its Go struct
// (additionalProperties false), requires exactly the fields Go always
// writes (not omitempty), and gives each the JSON type Go writes. A field
// added to the report without the schema, or to the schema without the
// report, fails here.
func TestSchemaIsTheReport(t *testing.T) {
	root := loadSchema(t)
	resolve := func(n *node) *node {
		for n != nil && n.Ref != "" {
			name, ok := strings.CutPrefix(n.Ref, "#/$defs/")
			if !ok || root.Defs[name] == nil {
				t.Fatalf("schema: unresolved $ref %q", n.Ref)
			}
			n = root.Defs[name]
		}
		return n
	}
	var walk func(where string, n *node, typ reflect.Type)
	walk = func(where string, n *node, typ reflect.Type) {
		n = resolve(n)
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch typ.Kind() {
		case reflect.Struct:
			if n.Type != "object" || n.AddProps == nil || *n.AddProps {
				t.Errorf("%s: want an object with additionalProperties false, got type %q", where, n.Type)
			}
			var names, required []string
			for _, f := range wire.Fields(typ) {
				names = append(names, f.Name)
				if !f.OmitEmpty {
					required = append(required, f.Name)
				}
				p, ok := n.Properties[f.Name]
				if !ok {
					t.Errorf("%s: the schema has no property %q (Go %s)", where, f.Name, typ.Name())
					continue
				}
				walk(where+"."+f.Name, p, f.Type)
			}
			for name := range n.Properties {
				if !slices.Contains(names, name) {
					t.Errorf("%s: the schema's property %q is no field of Go's %s", where, name, typ.Name())
				}
			}
			got := slices.Clone(n.Required)
			slices.Sort(got)
			slices.Sort(required)
			if !slices.Equal(got, required) {
				t.Errorf("%s: the schema requires %v; Go always writes %v", where, got, required)
			}
		case reflect.Slice:
			if n.Type != "array" || n.Items == nil {
				t.Errorf("%s: want an array with items, got type %q", where, n.Type)
				return
			}
			walk(where+"[]", n.Items, typ.Elem())
		default:
			if want, got := jsonType(typ), schemaType(n); want != got {
				t.Errorf("%s: Go writes %s, the schema says %s", where, want, got)
			}
		}
	}
	walk("report", root, reflect.TypeFor[wire.StatusReport]())
	if c, ok := root.Properties["version"].Const.(float64); !ok || int(c) != wire.StatusVersion {
		t.Errorf("the schema's version is %v; wire.StatusVersion is %d", root.Properties["version"].Const, wire.StatusVersion)
	}
}

func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Float64:
		return "number"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "integer"
	}
	return t.String()
}

// schemaType is the JSON type a schema node allows: its type, or the
// type of its const or enum values.
func schemaType(n *node) string {
	if n.Type != "" {
		return n.Type
	}
	vals := n.Enum
	if n.Const != nil {
		vals = []any{n.Const}
	}
	types := map[string]bool{}
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			types["string"] = true
		case bool:
			types["boolean"] = true
		case float64:
			if v == float64(int64(v)) {
				types["integer"] = true
			} else {
				types["number"] = true
			}
		}
	}
	if len(types) != 1 {
		return fmt.Sprintf("no one type (%v)", vals)
	}
	for k := range types {
		return k
	}
	return ""
}
