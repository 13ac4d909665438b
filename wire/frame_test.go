package wire

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
)

// Every struct in frames.go with a "type" field is a frame of the table
// (Frames): it implements Frame, its FrameType is one of the Type constants, Typed sets the field to
// it, and what it encodes to says so.
func TestEveryFrameTypeIsAFrame(t *testing.T) {
	fs := token.NewFileSet()
	file, err := parser.ParseFile(fs, "frames.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]bool{}
	var structs []string
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, sp := range g.Specs {
			switch s := sp.(type) {
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if strings.HasPrefix(n.Name, "Type") && i < len(s.Values) {
						if lit, ok := s.Values[i].(*ast.BasicLit); ok {
							consts[strings.Trim(lit.Value, `"`)] = true
						}
					}
				}
			case *ast.TypeSpec:
				st, ok := s.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, f := range st.Fields.List {
					if f.Tag != nil && strings.Contains(f.Tag.Value, `json:"type"`) {
						structs = append(structs, s.Name.Name)
					}
				}
			}
		}
	}
	frames := map[string]any{} // the table's, by struct name
	for _, s := range Frames {
		frames[s.GoType().Name()] = reflect.Zero(s.GoType()).Interface()
		if s.Type != reflect.Zero(s.GoType()).Interface().(Frame).FrameType() {
			t.Fatalf("the table's entry %q is of struct %s", s.Type, s.GoType().Name())
		}
	}
	seen := map[string]bool{}
	for _, name := range structs {
		if name == "Head" {
			continue // the type field alone, read before the frame is decoded
		}
		v, ok := frames[name]
		if !ok {
			t.Fatalf("struct %s has a type field: add it to the frame table (Frames, schema.go)", name)
		}
		fr, ok := v.(Frame)
		if !ok {
			t.Fatalf("%s does not implement Frame", name)
		}
		typ := fr.FrameType()
		if !consts[typ] || seen[typ] {
			t.Fatalf("%s: frame type %q is not one Type constant of its own", name, typ)
		}
		seen[typ] = true
		typed := fr.Typed()
		if reflect.TypeOf(typed) != reflect.TypeOf(v) || reflect.ValueOf(typed).FieldByName("Type").String() != typ {
			t.Fatalf("%s.Typed() = %#v", name, typed)
		}
		b, err := json.Marshal(typed)
		if err != nil || !strings.HasPrefix(string(b), `{"type":"`+typ+`"`) {
			t.Fatalf("%s encodes to %s (%v)", name, b, err)
		}
		if _, ok := reflect.New(reflect.TypeOf(v)).Interface().(Frame); !ok {
			t.Fatalf("*%s does not implement Frame", name)
		}
	}
	if len(seen) != len(consts) {
		t.Fatalf("frame types %v, constants %v", seen, consts)
	}
}
