// A report read from a socket is text from outside: every string in it is
// made printable before it is shown, as JSON or as a table.

package status

import (
	"reflect"

	"github.com/gputop/gputop/printable"
	"github.com/gputop/gputop/wire"
)

// Clean makes every string of r printable (printable.Clean), in place.
// It walks the report's fields, so a field added later is cleaned too.
func Clean(r *wire.StatusReport) { cleanValue(reflect.ValueOf(r).Elem()) }

func cleanValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(printable.Clean(v.String()))
	case reflect.Pointer:
		if !v.IsNil() {
			cleanValue(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			cleanValue(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				cleanValue(v.Field(i))
			}
		}
	}
}
