package ui

// pane is what every box of the screen is to the layout: it is told its
// size, says how many lines it would like, and draws itself cut to its
// box. The root model sizes them top to bottom (draw.go's layout), each by
// its name; a pane that is hidden gets no lines and is not drawn. Its data
// comes from present's Screen, handed over in refresh.go's setScreen.
type pane interface {
	SetSize(w, h int)
	View() string
	Lines() int // lines the pane wants for all it holds
}

// paneID names the panes the user can hide (and, later, focus).
type paneID int

const (
	paneHeader paneID = iota
	paneChart
	paneProcs
	paneTable
	paneHolders
	numPanes
)

// every box below the title bar is a pane
var _ = []pane{&headerModel{}, &chartModel{}, &procsModel{}, &summaryModel{}, &holdersModel{}}

// chartMinLines is the least height at which the chart is still a chart:
// the marker labels, four rows of plot, the X axis and its labels, the
// legend.
const chartMinLines = 7

// Lines is the chart's least height; it takes whatever the others leave.
func (c *chartModel) Lines() int { return chartMinLines }
