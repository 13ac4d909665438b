package ingest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// The store's mutators that only an Ingest may call: a source or the UI
// calling one would change the store behind the Tap's back, and a
// recording would miss it. (TakeSnapshot, AgentEnded and HostDevice are
// left out: an Ingest has methods of those names.)
var storeOnly = map[string]bool{
	"AddNVML": true, "SetDevice": true, "SetDeviceError": true, "SetProcs": true, "SetRate": true,
	"SetHost": true, "AgentHello": true, "AgentSample": true, "AgentMark": true, "AgentOOM": true,
	"AgentHolders": true, "SetHeld": true, "AddRow": true, "EditRow": true,
}

// No code outside store and ingest (tests aside) calls them.
func TestOnlyIngestWritesTheStore(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "store", rel == "ingest", rel != "." && strings.HasPrefix(d.Name(), "."), d.Name() == "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && storeOnly[sel.Sel.Name] {
					t.Errorf("%s: calls %s: write through an ingest.Ingest instead", fset.Position(call.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files found under %s", files, root)
	}
}
