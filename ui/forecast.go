// The forecasts on screen: the selected process's under the process
// pane's rows, and one line for each agent process of the GPU under the
// summary.

package ui

import (
	"fmt"

	"github.com/gputop/gputop/forecast"
)

// maxSummaryForecasts bounds the forecast lines under the summary; the
// process pane shows any process's.
const maxSummaryForecasts = 4

// forecastHead is a forecast's conclusion, coloured by what it says.
func (st *Styles) forecastHead(f forecast.Forecast) string {
	switch f.Status {
	case forecast.OOM:
		return st.Error.Render(f.Head())
	case forecast.Stable:
		return st.Good.Render(f.Head())
	}
	return st.Dim.Render(f.Head())
}

// forecastLines are the selected process's forecast in full, wrapped to
// the pane; none for a process without an agent.
func (m *procsModel) forecastLines() []string {
	sel, ok := m.Selected()
	if !ok || !sel.Agent {
		return nil
	}
	for _, f := range m.forecasts {
		if f.PID == sel.PID {
			text := "forecast: " + m.styles.forecastHead(f.Forecast)
			if d := f.Detail(); d != "" {
				text += ": " + d
			}
			if f.Status == forecast.OOM {
				text += "; cause: " + f.CauseText()
			}
			lines := wrapTo(text, max(m.w-2, 1))
			for i := range lines {
				lines[i] = "  " + lines[i]
			}
			return lines
		}
	}
	return nil
}

// forecastLines are the GPU's forecasts under the summary's peaks: one
// per agent process, its conclusion and, for an OOM, when and what grows.
func (m *summaryModel) forecastLines() []string {
	fs := m.d.Forecasts
	var out []string
	for i, f := range fs {
		if i == maxSummaryForecasts {
			out = append(out, m.styles.Dim.Render(fmt.Sprintf("  … and %d more processes' forecasts (the process pane shows each)", len(fs)-i)))
			break
		}
		head := m.styles.forecastHead(f.Forecast)
		if f.Status == forecast.NotEnough {
			head = m.styles.Dim.Render("not enough data yet") // what there is: the process pane
		}
		text := m.styles.Bold.Render("forecast, pid "+f.Label+":") + " " + head
		if w := f.When(); w != "" {
			text += ", " + w
		}
		if f.Status == forecast.OOM {
			text += "; cause: " + f.CauseText()
		}
		out = append(out, m.wrap(text)...)
	}
	return out
}
