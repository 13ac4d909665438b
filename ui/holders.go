package ui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gputop/gputop/summary"
	"github.com/gputop/gputop/wire"
)

// holdersTimeout is how long the pane waits for an agent's answer before
// saying it got none.
const holdersTimeout = 15 * time.Second

// holdersModel shows who keeps the selected process's CUDA memory alive:
// the agent's holders report, groups sorted by bytes.
type holdersModel struct {
	styles *Styles
	w, h   int

	pid     int           // process the pane is about
	rep     *wire.Holders // latest report of pid
	note    string        // why there is no report (no agent, replay, ...)
	asking  int           // pid asked, 0 when not waiting
	askedAt int64
	before  *wire.Holders // pid's report when asked; a different one is the answer
	now     int64
	cursor  int64 // a replay's cursor, which a report's age is measured from; 0 live
	tc      *tableCache
}

func newHolders(st *Styles) holdersModel { return holdersModel{styles: st, tc: &tableCache{}} }

func (m *holdersModel) SetSize(w, h int) { m.w, m.h = w, h }

// Ask records that holders were requested from pid.
func (m *holdersModel) Ask(pid int, current *wire.Holders, now int64) {
	m.asking, m.askedAt, m.before = pid, now, current
}

// SetData updates the pane with the selected process and its report, and
// ends the wait once a newer report than the one seen at asking arrives.
func (m *holdersModel) SetData(pid int, rep *wire.Holders, note string, now int64) {
	m.pid, m.rep, m.note, m.now = pid, rep, note, now
	if m.asking != 0 && m.asking == pid && rep != nil && newerHolders(rep, m.before) {
		m.asking = 0
	}
}

func newerHolders(h, old *wire.Holders) bool {
	if old == nil {
		return h != nil
	}
	return h != nil && (h.T != old.T || h.ID != old.ID)
}

// Waiting reports whether an answer is still expected, and whether it is late.
func (m *holdersModel) Waiting() (pid int, late bool) {
	if m.asking == 0 {
		return 0, false
	}
	return m.asking, time.Duration(m.now-m.askedAt) > holdersTimeout
}

func (m *holdersModel) late() bool {
	_, l := m.Waiting()
	return l
}

// Lines is how many lines the pane wants.
func (m *holdersModel) Lines() int {
	if m.rep == nil {
		return 2
	}
	n := len(m.rep.Groups)
	for _, f := range m.rep.Frameworks {
		n += len(f.Held) + 1 // its line, its groups
	}
	return 2 + max(n, 1)
}

func (m *holdersModel) View() string {
	st := m.styles
	if m.h <= 0 {
		return ""
	}
	title := st.TableHeader.Render(fmt.Sprintf("HOLDERS of pid %d", m.pid))
	if m.pid == 0 {
		title = st.TableHeader.Render("HOLDERS")
	}
	var lines []string
	if pid, late := m.Waiting(); pid != 0 {
		if late {
			lines = append(lines, title+"  "+st.Warn.Render(fmt.Sprintf("no answer from pid %d after %s (is it busy in a long CUDA call?)", pid, holdersTimeout)))
		} else {
			lines = append(lines, title+"  "+st.Warn.Render(fmt.Sprintf("asking pid %d…", pid)))
		}
	}
	if m.rep == nil {
		note := m.note
		if note == "" {
			note = "no holders report yet"
		}
		if len(lines) == 0 {
			lines = append(lines, title+"  "+st.Dim.Render(note))
		}
		return fit(strings.Join(lines, "\n"), m.w, m.h)
	}
	r := m.rep
	age := ""
	switch {
	case m.cursor != 0 && m.cursor > r.T:
		age = fmt.Sprintf(", %s before the cursor", time.Duration(m.cursor-r.T).Round(100*time.Millisecond))
	case m.cursor != 0:
		age = ", at the cursor"
	case m.now > r.T:
		age = fmt.Sprintf(", %s ago", time.Duration(m.now-r.T).Round(time.Second))
	}
	info := fmt.Sprintf("%s in %s, %s skipped%s", humanBytes(r.Total), plural(len(r.Groups), "group"), plural(r.Skipped, "object"), age)
	if len(r.Groups) == 0 && len(r.Frameworks) > 0 && r.Held != nil && r.Held.Skipped != "" {
		info = r.Held.Skipped + age // a JAX or CuPy device: no torch walk
	}
	if r.TookMS > 0 {
		info += fmt.Sprintf(", walk took %.0f ms", r.TookMS)
	}
	if len(lines) == 0 {
		lines = append(lines, title+"  "+st.Dim.Render(info))
	} else {
		lines = append(lines, st.Dim.Render("  previous report: "+info))
	}
	// the frameworks beside torch (JAX, CuPy): a line each, in their own
	// names; their holders (JAX's live arrays) join the table, the kind
	// saying whose
	groups := append([]wire.HolderGroup(nil), r.Groups...)
	for _, f := range r.Frameworks {
		lines = append(lines, "  "+summary.FrameworkHoldersText(f))
		for _, g := range f.Held {
			g.Kind = f.Name + " " + g.Kind
			groups = append(groups, g)
		}
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Bytes > groups[j].Bytes })
	if len(groups) == 0 {
		if len(r.Frameworks) == 0 {
			lines = append(lines, st.Dim.Render("  no CUDA tensors are alive in this process"))
		}
		return fit(strings.Join(lines, "\n"), m.w, m.h)
	}
	cols := []column{
		{Title: "KIND", Priority: 6},
		{Title: "NAME", Priority: 9},
		{Title: "MiB", Right: true, Priority: 8},
		{Title: "TENSORS", Right: true, Priority: 4},
		{Title: "EXAMPLES", Priority: 3},
		{Title: "HINT", Priority: 7, Flex: true},
	}
	room := m.h - len(lines) - 1
	var data [][]string
	for i, g := range groups {
		if i == room-1 && len(groups) > room {
			rest := uint64(0)
			for _, x := range groups[i:] {
				rest += x.Bytes
			}
			data = append(data, []string{"", fmt.Sprintf("(%d more)", len(groups)-i), fmt.Sprintf("%.2f", float64(rest)/mib), "", "", ""})
			break
		}
		data = append(data, []string{g.Kind, g.Name, fmt.Sprintf("%.2f", float64(g.Bytes)/mib), strconv.Itoa(g.Tensors),
			strings.Join(g.Examples, " "), g.Hint})
	}
	lines = append(lines, m.tc.render(st, tableSpec{Cols: cols, Rows: data, Width: m.w, Selected: -1}))
	return fit(strings.Join(lines, "\n"), m.w, m.h)
}
