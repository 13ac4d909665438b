package summary

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// csvHeader is the summary CSV's header as of 2026-12: every header from
// then on starts with it (the first seven columns are a contract, the
// rest only grow at the end).
const csvHeader = "label,time,device,allocated_mb,reserved_mb,peak_mb,nvml_used_mb,nvml_peak_mb," +
	"delta_allocated_mb,delta_nvml_used_mb,device_name,pid,source,allocated_bytes,reserved_bytes,peak_bytes," +
	"nvml_used_bytes,nvml_peak_bytes,oom_requested_bytes,oom_free_bytes,oom_limit_bytes,verdict,verdict_basis," +
	"held_python_bytes,held_torch_internal_bytes,held_unaccounted_bytes,top_holder,verdict_text,host,rank,job,dump"

// layoutHeader is what the header grew by with torch's cache at each row
// (2027-01).
const layoutHeader = ",free_in_segments_bytes,largest_free_bytes,segments,graph_pools_bytes"

// ledgerHeader is what the header grew by with the ledger at each row
// (2027-01).
const ledgerHeader = ",params_bytes,grads_bytes,optimizer_bytes,activations_bytes,other_tensors_bytes,workspace_bytes," +
	"cached_free_bytes,outside_torch_bytes,unattributed_bytes"

// the other frameworks' column, after the ledger's
const frameworkHeader = ",framework"

// what the nvml_ columns measure, after the frameworks'
const nvmlMemoryHeader = ",nvml_memory"

// The CSV a file gets starts with the header docs/recordings.md's
// "Summary CSV" documents, byte for byte, and that header keeps the columns it had.
func TestCSVHeaderIsTheDocumentedOne(t *testing.T) {
	snaps, devs := sample()
	path := filepath.Join(t.TempDir(), "out.csv")
	if err := WriteCSV(path, snaps, devs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/recordings.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(doc), "\n## Summary CSV\n")
	_, block, _ := strings.Cut(sec, "```\n")
	header, _, _ := strings.Cut(block, "\n")
	if first, _, _ := strings.Cut(string(b), "\n"); first != header {
		t.Fatalf("CSV header\n%s\ndocs/recordings.md's Summary CSV documents\n%s", first, header)
	}
	if had := csvHeader + layoutHeader + ledgerHeader; header != had && !strings.HasPrefix(header, had+",") {
		t.Fatalf("the header\n%s\ndoes not start with the columns it had\n%s", header, had)
	}
}

// The list keeps its own rules: unique CSV names that end in their unit,
// one place per column in each table, one label column the TUI shortens,
// and both ways of writing a value.
func TestColumnsAreWellFormed(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	names := map[string]bool{}
	text, tui := map[int]string{}, map[int]string{}
	flex := 0
	for _, c := range Columns {
		if !snake.MatchString(c.Name) || names[c.Name] {
			t.Errorf("column %q: a CSV name must be lower_snake and unique", c.Name)
		}
		names[c.Name] = true
		if c.Value.CSV == nil || c.Value.Cell == nil {
			t.Errorf("column %q: no CSV or table cell", c.Name)
		}
		switch u := c.Value.Unit; {
		case u == UnitMiB && !strings.HasSuffix(c.Name, "_mb"),
			u == UnitBytes && !strings.HasSuffix(c.Name, "_bytes"),
			u == NoUnit && (strings.HasSuffix(c.Name, "_mb") || strings.HasSuffix(c.Name, "_bytes")):
			t.Errorf("column %q: its name does not end in its unit %q", c.Name, u)
		}
		if c.Text != nil {
			if o, ok := text[c.Text.Place]; ok {
				t.Errorf("columns %q and %q share the text table's place %d", o, c.Name, c.Text.Place)
			}
			text[c.Text.Place] = c.Name
		}
		if c.TUI != nil {
			if o, ok := tui[c.TUI.Place]; ok {
				t.Errorf("columns %q and %q share the TUI's place %d", o, c.Name, c.TUI.Place)
			}
			tui[c.TUI.Place] = c.Name
			if c.TUI.Flex {
				flex++
			}
		}
	}
	if flex != 1 {
		t.Errorf("%d flex columns in the TUI's table, want the label alone", flex)
	}
}

// addColumn appends c to the list for one test.
func addColumn(t *testing.T, c Column) {
	old := Columns
	Columns = append(slices.Clip(old), c)
	t.Cleanup(func() { Columns = old })
}

// The recipe of ARCHITECTURE.md's "A summary column": one entry added to
// Columns is a new last CSV column, and, marked for the text table, a
// column there at its place; a CSV-only one stays out of the text table.
func TestAColumnAddedToTheList(t *testing.T) {
	addColumn(t, Column{Name: "test_cached_free_bytes", Origin: OriginDerived,
		Value: byteCount(func(r Row) *uint64 {
			if r.Reserved == nil || r.Allocated == nil {
				return nil
			}
			v := *r.Reserved - *r.Allocated
			return &v
		}),
		Text: &TextCol{Header: "cached free", Place: 75}})
	addColumn(t, Column{Name: "test_label_again", Origin: OriginRow, Value: text(label)})

	snaps, devs := sample()
	recs := Records(snaps, devs)
	h := recs[0]
	if got := strings.Join(h, ","); got != csvHeader+layoutHeader+ledgerHeader+frameworkHeader+nvmlMemoryHeader+",test_cached_free_bytes,test_label_again" {
		t.Fatalf("header %s", got)
	}
	want := []string{"1048576", "", "7340032", "", "1048576"} // sample's rows: reserved - allocated
	for i, r := range recs[1:] {
		if len(r) != len(h) || r[len(r)-2] != want[i] || r[len(r)-1] != snaps[i].Label {
			t.Errorf("row %d: %q, want %s and its label at the end", i, r, want[i])
		}
	}

	tbl := Table(snaps, devs)
	if !regexp.MustCompile(`NVML used MiB +cached free +$`).MatchString(tbl[0]) {
		t.Fatalf("text table header %q: the column should come after NVML used, before the verdict", tbl[0])
	}
	for _, l := range tbl {
		if strings.Contains(l, "label again") || strings.Contains(l, "test_label_again") {
			t.Fatalf("a CSV-only column is in the text table: %q", l)
		}
	}
	if !strings.Contains(tbl[3], "7.0 MiB") || !strings.Contains(tbl[2], "—") {
		t.Fatalf("text table rows:\n%s", strings.Join(tbl, "\n"))
	}
}

// Rows of a remote host and of a job: the CSV's pid is the host's own, the
// tables' the store's key; host, rank and job come from the context.
func TestColumnsReadTheContext(t *testing.T) {
	key := store.HostPID(1, 77)
	snaps := []wire.Row{{T: 1e18, Label: "r", Dev: 0, PID: key, Source: "agent"}}
	devs := []store.Device{{Name: "H200", Host: "node1"}}
	recs := RecordsWithPlaces(snaps, devs, map[int]wire.Place{key: {Rank: 3, Job: "j"}})
	col := map[string]string{}
	for i, n := range recs[0] {
		col[n] = recs[1][i]
	}
	if col["pid"] != "77" || col["host"] != "node1" || col["rank"] != "3" || col["job"] != "j" {
		t.Fatalf("%v", col)
	}
	if tbl := Table(snaps, devs); !strings.Contains(tbl[1], " "+strconv.Itoa(key)+" ") {
		t.Fatalf("text table %q", tbl[1])
	}
}

// docs/recordings.md's table of the CSV's columns and the columns, both
// ways: each column of the list is in a row of the table (by name, or by
// a `prefix_*` that covers it), and each name the table gives is a column
// or a prefix of some.
func TestCSVColumnsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/recordings.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(doc), "\n## Summary CSV\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	code := regexp.MustCompile("`([a-z_]+\\*?)`")
	var names []string
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 2 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			names = append(names, m[1])
		}
	}
	covers := func(name, col string) bool {
		if p, ok := strings.CutSuffix(name, "*"); ok {
			return strings.HasPrefix(col, p)
		}
		return name == col
	}
	for _, c := range Columns {
		if !slices.ContainsFunc(names, func(n string) bool { return covers(n, c.Name) }) {
			t.Errorf("column %s is in no row of docs/recordings.md's table of the CSV's columns", c.Name)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(Columns, func(c Column) bool { return covers(n, c.Name) }) {
			t.Errorf("docs/recordings.md's table of the CSV's columns names %s, which is no column", n)
		}
	}
}

// nvml_memory says what the nvml_ figures measure: a unified-memory GPU's
// are the system's memory, an ordinary GPU's its own; no NVML figure, no word.
func TestNVMLMemoryColumn(t *testing.T) {
	used := uint64(1 << 30)
	devs := []store.Device{{Index: 0, Name: "H200"}, {Index: 1, Name: "GB10", Memory: wire.MemorySystem}}
	rows := []wire.Row{{Label: "a", Dev: 0, NVMLUsed: &used}, {Label: "b", Dev: 1, NVMLUsed: &used}, {Label: "c", Dev: 1}}
	recs := Records(rows, devs)
	col := slices.Index(recs[0], "nvml_memory")
	if col < 0 {
		t.Fatalf("no nvml_memory column in %v", recs[0])
	}
	for i, want := range []string{"device", "system", ""} {
		if got := recs[i+1][col]; got != want {
			t.Errorf("row %s: nvml_memory %q, want %q", rows[i].Label, got, want)
		}
	}
}
