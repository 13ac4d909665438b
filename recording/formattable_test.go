package recording

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/gputop/gputop/wire"
)

//go:generate go test -run TestFormatFrameTableIsCurrent -update-format .

var updateFormat = flag.Bool("update-format", false, "rewrite FORMAT.md's frame table from the frame table (wire/schema.go)")

// FORMAT.md's frame table stands between these lines.
const (
	frameTableBegin = "<!-- frames: written from wire/schema.go's table by `go generate ./recording`; edit the table there -->"
	frameTableEnd   = "<!-- end of frames -->"
)

// frameTableMarkdown is FORMAT.md's frame table: a row per recorded frame
// type, with the fields its line must have (wire.Spec.Required).
func frameTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| type | what | fields that must be present |\n| --- | --- | --- |\n")
	for _, s := range wire.All() {
		if !s.Recorded {
			continue
		}
		var req []string
		for _, f := range s.Required() {
			req = append(req, "`"+f.Name+"`")
		}
		b.WriteString("| `" + s.Type + "` | " + s.Doc + " | " + strings.Join(req, ", ") + " |\n")
	}
	return b.String()
}

// TestFormatFrameTableIsCurrent holds FORMAT.md's frame table to the
// frame table; go generate ./recording rewrites it.
func TestFormatFrameTableIsCurrent(t *testing.T) {
	doc, err := os.ReadFile("FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), frameTableBegin+"\n")
	table, after, ok2 := strings.Cut(rest, frameTableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("FORMAT.md lacks the lines %q and %q around the frame table", frameTableBegin, frameTableEnd)
	}
	want := frameTableMarkdown()
	if *updateFormat {
		if err := os.WriteFile("FORMAT.md", []byte(before+frameTableBegin+"\n"+want+frameTableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if table != want {
		t.Fatalf("FORMAT.md's frame table is stale: run go generate ./recording\nwant:\n%s", want)
	}
}
