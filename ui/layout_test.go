package ui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// goldenSizes are the terminal sizes every pane and the help are held to.
var goldenSizes = [][2]int{{80, 24}, {120, 40}, {160, 50}}

// Every pane and the full help at each size, the screen too.
func TestGoldenPanesAtEverySize(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			name := func(p string) string { return fmt.Sprintf("size_%dx%d_%s", sz[0], sz[1], p) }
			m := newModel(t, newFixture(), Options{Title: fixTitle}, sz[0], sz[1])
			golden(t, name("header"), ansi.Strip(m.header.View()))
			golden(t, name("chart"), ansi.Strip(m.chart.View()))
			golden(t, name("procs"), ansi.Strip(m.procs.View()))
			golden(t, name("table"), ansi.Strip(m.table.View()))
			hm := send(t, m, press("h")...)
			golden(t, name("holders"), ansi.Strip(hm.holders.View()))
			help := send(t, m, press("?")...)
			checkBox(t, help.View().Content, sz[0], sz[1])
			golden(t, name("help"), screen(help))
		})
	}
}

// `? help` and `q quit` end the key bar at every width the UI draws at,
// whatever else has to go; in the prompt too, after its own keys.
func TestKeyBarKeepsHelpAndQuit(t *testing.T) {
	for _, replay := range []bool{false, true} {
		for w := MinWidth; w <= 200; w++ {
			m := newModel(t, newFixture(), Options{Title: fixTitle, Replay: replay}, w, 24)
			for _, prompt := range []bool{false, true} {
				if prompt && replay {
					continue // a replay opens no label prompt (s needs a live process)
				}
				if prompt {
					m = send(t, m, press("s")...)
				}
				lines := strings.Split(screen(m), "\n")
				bar := lines[len(lines)-1]
				if !strings.HasSuffix(strings.TrimRight(bar, " "), "? help • q quit") {
					t.Fatalf("replay %v, prompt %v, %d columns: key bar %q", replay, prompt, w, bar)
				}
				if prompt && !strings.HasPrefix(bar, "enter record • esc ") {
					t.Fatalf("%d columns: the prompt's keys come first: %q", w, bar)
				}
			}
		}
	}
}

// At 80x24 the full help shows every key on one page.
func TestHelpFitsAt80x24(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 80, 24)
	m = send(t, m, press("?")...)
	out := screen(m)
	if m.helpN != 1 {
		t.Fatalf("help takes %d pages at 80x24, want 1:\n%s", m.helpN, out)
	}
	for _, g := range m.keys.FullHelp() {
		for _, b := range g {
			if b.Enabled() && (!strings.Contains(out, b.Help().Key+" ") || !strings.Contains(out, b.Help().Desc)) {
				t.Errorf("help at 80x24 lacks %q %q:\n%s", b.Help().Key, b.Help().Desc, out)
			}
		}
	}
	if m = send(t, m, press("?")...); m.help.ShowAll {
		t.Error("? again should close the help")
	}
}

// Where the help does not fit on one screen it takes pages, and ? turns
// them before it closes: every key is on one of them.
func TestHelpPagesAt40x10(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 40, 10)
	m = send(t, m, press("?")...)
	if m.helpN < 2 {
		t.Fatalf("help at 40x10 takes %d page(s), want several:\n%s", m.helpN, screen(m))
	}
	var seen strings.Builder
	for i := 0; i < m.helpN; i++ {
		out := screen(m)
		checkBox(t, m.View().Content, 40, 10)
		if want := fmt.Sprintf("page %d of %d", i+1, m.helpN); !strings.Contains(out, want) {
			t.Errorf("page %d does not say %q:\n%s", i+1, want, out)
		}
		seen.WriteString(out)
		m = send(t, m, press("?")...)
	}
	if m.help.ShowAll {
		t.Error("? on the last page should close the help")
	}
	for _, g := range m.keys.FullHelp() {
		for _, b := range g {
			if b.Enabled() && !strings.Contains(seen.String(), b.Help().Desc) {
				t.Errorf("no help page shows %q", b.Help().Desc)
			}
		}
	}
}

// 40x10, the least size drawn: the title, the device, a chart with its
// legend, the status line and the key bar with help and quit.
func TestSmallest(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 40, 10)
	out := screen(m)
	checkBox(t, m.View().Content, 40, 10)
	golden(t, "screen_40x10", out)
	for _, want := range []string{"GPU 0", "└", "NVML", "? help • q quit"} {
		if !strings.Contains(out, want) {
			t.Errorf("40x10 lacks %q:\n%s", want, out)
		}
	}
}

// 1 and 2 hide the process pane and the summary pane; the chart takes
// their lines, and the same key shows them again.
func TestHidePanesGivesTheChartTheirLines(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 80, 24)
	before := m.layout()
	m = send(t, m, press("1", "2")...)
	l := m.layout()
	if l.procs != 0 || l.table != 0 || l.chart != before.chart+before.procs+before.table {
		t.Fatalf("after 1 and 2: %+v, before %+v", l, before)
	}
	out := screen(m)
	checkBox(t, m.View().Content, 80, 24)
	if strings.Contains(out, "PROCESS") || strings.Contains(out, "LABEL") {
		t.Errorf("hidden panes still drawn:\n%s", out)
	}
	if !strings.Contains(out, "1 show processes") && !strings.Contains(out, "? help • q quit") {
		t.Errorf("key bar: %s", out)
	}
	m = send(t, m, press("1", "2")...)
	if l := m.layout(); l != before {
		t.Errorf("shown again: %+v, want %+v", l, before)
	}
}

// The legend keeps every value at 80 columns: shorter names, the same
// figures as at 160.
func TestLegendKeepsValuesAt80(t *testing.T) {
	for _, w := range []int{80, 120, 160} {
		m := newModel(t, newFixture(), Options{Title: fixTitle}, w, 24)
		legend := ansi.Strip(m.chart.legend())
		for _, v := range []string{"2.49 GiB", "1.50 GiB", "2.97 GiB", "1.25 GiB"} {
			if !strings.Contains(legend, v) {
				t.Errorf("%d columns: legend %q lacks %s", w, legend, v)
			}
		}
	}
}

// The chart's axis writes bytes as the tables do: GiB and MiB.
func TestAxisUnitsAreTheTables(t *testing.T) {
	m := newModel(t, newFixture(), Options{Title: fixTitle}, 80, 24)
	chart := ansi.Strip(m.chart.View())
	if !strings.Contains(chart, " GiB│") {
		t.Errorf("axis labels should end in GiB:\n%s", chart)
	}
	_ = tea.KeyPressMsg{}
}
