package ui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// headerModel shows one line per device: name, NVML used / total and its
// share ("mem"), the achieved sample rate ("samples/s"), and the device's
// NVML error in red.
type headerModel struct {
	styles *Styles
	w, h   int
	devs   []present.Device // NVML used at the cursor with each; nil when NVML has nothing
	sel    int
	hosts  []store.Host    // the remote hosts of a multi-host view: a line of their own
	rates  map[int]float64 // the rate shown of each device, by index (SetData)
}

func newHeader(st *Styles) headerModel { return headerModel{styles: st} }

func (m *headerModel) SetSize(w, h int) { m.w, m.h = w, h }

// SetData gives the devices to show. An achieved rate moves by a sample or
// two from one second to the next (999, 1000, 1001/s), which would draw the
// whole screen again every second for nothing a person needs: the rate
// shown stays until the achieved one is more than rateStep away from it.
func (m *headerModel) SetData(devs []present.Device, sel int) {
	m.sel = sel
	if m.rates == nil {
		m.rates = map[int]float64{}
	}
	m.devs = devs
	copied := false
	for i, d := range devs {
		shown, ok := m.rates[d.Index]
		if !ok || math.Abs(d.Rate-shown) > rateStep*shown || (d.Rate == 0) != (shown == 0) {
			m.rates[d.Index] = d.Rate
			continue
		}
		if d.Rate != shown {
			if !copied { // the presenter's slice is not the header's to change
				m.devs, copied = slices.Clone(devs), true
			}
			m.devs[i].Rate = shown
		}
	}
}

// rateStep is how far, as a share of the rate shown, the achieved rate
// moves before the header shows it: a sampler falling behind by 2% shows.
const rateStep = 0.01

// SetHosts gives the remote hosts whose state the header's first line shows.
func (m *headerModel) SetHosts(hs []store.Host) { m.hosts = hs }

// Lines is how many lines the header wants.
func (m *headerModel) Lines() int { return max(len(m.devs), 1) + m.hostLines() }

// hostLines: a line per host, so each one's reason shows whole; past
// maxHostLines hosts, one line for them all.
func (m *headerModel) hostLines() int {
	if len(m.hosts) <= maxHostLines {
		return len(m.hosts)
	}
	return 1
}

const maxHostLines = 4

func (m *headerModel) View() string {
	st := m.styles
	if n := m.hostLines(); n > 0 && m.h > n {
		devs := *m
		devs.hosts, devs.h = nil, m.h-n
		return m.hostsView() + "\n" + devs.View()
	}
	if len(m.devs) == 0 {
		return fit(st.Dim.Render("no GPU known yet (waiting for NVML or an agent)"), m.w, m.h)
	}
	// when the header is shorter than the device list, keep the selected
	// device in view
	first := 0
	if m.h > 0 && len(m.devs) > m.h {
		first = min(max(m.sel-m.h/2, 0), len(m.devs)-m.h)
	}
	var lines []string
	for i := first; i < len(m.devs) && len(lines) < max(m.h, 1); i++ {
		lines = append(lines, m.line(m.devs[i], i == m.sel))
	}
	return fit(strings.Join(lines, "\n"), m.w, m.h)
}

func (m *headerModel) line(dl present.Device, sel bool) string {
	st := m.styles
	d := dl.Device
	mark := "  "
	if sel {
		mark = "▸ "
	}
	name := d.Name
	if name == "" {
		name = "unknown device"
	}
	if d.Host != "" {
		name = d.Host + ": " + name
	}
	id := fmt.Sprintf("%sGPU %d", mark, d.Index)
	if sel {
		id = st.DevSelected.Render(id)
	}
	nameW := 24
	if m.w < 100 {
		nameW = 14
	}
	parts := []string{id, st.DevName.Render(padRight(truncate(name, nameW), nameW))}
	if d.Err != "" {
		// the error first: the figures after it are the last ones before it
		parts = append(parts, st.Error.Render("✗ NVML: "+d.Err))
		if dl.Used != nil {
			parts = append(parts, st.Dim.Render("last "+humanBytes(*dl.Used)))
		}
		if d.Source == "agent" {
			parts = append(parts, st.Warn.Render("agent-only"))
		}
		return strings.Join(parts, "  ")
	}
	var share, figure string
	switch {
	case dl.Used != nil && d.Total > 0:
		// "mem" before the share: a bare % reads as GPU utilisation
		share = "mem " + percent(*dl.Used, d.Total)
		figure = humanBytes(*dl.Used) + " / " + humanBytes(d.Total)
		parts = append(parts, fmt.Sprintf("%10s / %-10s %s", humanBytes(*dl.Used), humanBytes(d.Total), share))
		if m.w >= 120 {
			parts = append(parts, m.bar(*dl.Used, d.Total, 20))
		}
	case dl.Used != nil:
		figure = humanBytes(*dl.Used) + " used"
		parts = append(parts, fmt.Sprintf("%10s used", humanBytes(*dl.Used)))
	case d.Total > 0:
		figure = dash + " / " + humanBytes(d.Total)
		parts = append(parts, fmt.Sprintf("%10s / %-10s", dash, humanBytes(d.Total)))
	}
	var rate, agent, sys string
	if d.Memory == wire.MemorySystem { // the figures are the system's: say so beside them
		sys = st.Warn.Render(systemMemoryWords(m.w))
		parts = append(parts, sys)
	}
	if r := rateString(d.Rate); r != "" {
		rate = strings.TrimSuffix(r, "/s") + " samples/s"
		parts = append(parts, st.Dim.Render(fmt.Sprintf("%15s", rate)))
	}
	if d.Source == "agent" {
		agent = st.Warn.Render("agent-only")
		parts = append(parts, st.Warn.Render("agent-only (no NVML for this GPU)"))
	}
	line := strings.Join(parts, "  ")
	if lipgloss.Width(line) <= m.w {
		return line
	}
	// narrower: the figures keep their labels; the name goes first, then
	// the total, then the used bytes (the legend has them)
	used := ""
	if dl.Used != nil && d.Total > 0 {
		used = humanBytes(*dl.Used)
	}
	for _, figs := range [][]string{{figure, share}, {used, share}, {share}} {
		figs = slices.DeleteFunc(append(figs, sys, st.Dim.Render(rate), agent), func(s string) bool { return lipgloss.Width(s) == 0 })
		narrow := strings.Join(append([]string{id}, figs...), " ")
		if room := m.w - lipgloss.Width(narrow) - 1; room >= 6 {
			narrow = strings.Join(append([]string{id, st.DevName.Render(truncate(name, room-1))}, figs...), " ")
		}
		if lipgloss.Width(narrow) <= m.w {
			return narrow
		}
	}
	return line
}

// systemMemoryWords labels a unified-memory device's figures, shorter in a
// narrow terminal.
func systemMemoryWords(w int) string {
	if w < 100 {
		return "system mem"
	}
	return "system memory (unified)"
}

// bar is a usage gauge of w cells.
func (m *headerModel) bar(used, total uint64, w int) string {
	n := int(float64(used) / float64(total) * float64(w))
	n = min(max(n, 0), w)
	if used > 0 && n == 0 {
		n = 1
	}
	return m.styles.BarFull.Render(strings.Repeat("█", n)) + m.styles.BarEmpty.Render(strings.Repeat("░", w-n))
}

// hostsView is each remote host with its state: connected, or why not.
func (m *headerModel) hostsView() string {
	st := m.styles
	var parts []string
	for _, h := range m.hosts {
		var part string
		switch {
		case h.Up:
			part = h.Name + " " + st.Good.Render("connected")
		case h.Reason == "connecting":
			part = h.Name + " " + st.Warn.Render("connecting")
		default:
			part = h.Name + " " + st.Error.Render("disconnected: "+h.Reason)
		}
		if h.Limited != "" { // what the bounds on its stream kept out
			part += " " + st.Warn.Render("("+h.Limited+")")
		}
		parts = append(parts, part)
	}
	if len(parts) > maxHostLines {
		return fit("hosts  "+strings.Join(parts, "  "), m.w, 1)
	}
	return fit(strings.Join(parts, "\n"), m.w, len(parts))
}
