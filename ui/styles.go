package ui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
	"github.com/gputop/gputop/present"
	"github.com/gputop/gputop/wire"
)

// Styles holds every style the UI uses, so a theme is one value.
type Styles struct {
	Title     lipgloss.Style
	TitleInfo lipgloss.Style
	Dim       lipgloss.Style
	Bold      lipgloss.Style
	Error     lipgloss.Style
	Good      lipgloss.Style
	Warn      lipgloss.Style

	DevSelected lipgloss.Style
	DevName     lipgloss.Style
	BarFull     lipgloss.Style
	BarEmpty    lipgloss.Style

	Axis      lipgloss.Style
	AxisLabel lipgloss.Style
	// chart series, by source
	NVMLUsed  lipgloss.Style
	Allocated lipgloss.Style
	Reserved  lipgloss.Style
	Peak      lipgloss.Style
	// the largest free block in torch's cache
	LargestFree lipgloss.Style
	// chart markers, by kind
	MarkSnapshot lipgloss.Style
	MarkPhase    lipgloss.Style
	MarkOOM      lipgloss.Style
	MarkEnded    lipgloss.Style

	// the ledger's parts, by wire's part name (ledger.go)
	LedgerPart map[string]lipgloss.Style

	TableHeader lipgloss.Style
	Cell        lipgloss.Style
	RowSelected lipgloss.Style
	Missing     lipgloss.Style

	Status      lipgloss.Style
	StatusError lipgloss.Style
	Prompt      lipgloss.Style

	Help help.Styles
}

// DefaultStyles is the dark-terminal theme.
func DefaultStyles() Styles {
	c := lipgloss.Color
	return Styles{
		Title:     lipgloss.NewStyle().Bold(true).Foreground(c("#FFFFFF")).Background(c("#5A56E0")).Padding(0, 1),
		TitleInfo: lipgloss.NewStyle().Foreground(c("#C8C8C8")),
		Dim:       lipgloss.NewStyle().Foreground(c("#7A7A7A")),
		Bold:      lipgloss.NewStyle().Bold(true),
		Error:     lipgloss.NewStyle().Foreground(c("#FF5F5F")).Bold(true),
		Good:      lipgloss.NewStyle().Foreground(c("#5FD75F")).Bold(true),
		Warn:      lipgloss.NewStyle().Foreground(c("#FFAF00")),

		DevSelected: lipgloss.NewStyle().Bold(true).Foreground(c("#FFFFFF")).Background(c("#303050")),
		DevName:     lipgloss.NewStyle().Foreground(c("#AFAFFF")),
		BarFull:     lipgloss.NewStyle().Foreground(c("#5FD75F")),
		BarEmpty:    lipgloss.NewStyle().Foreground(c("#3A3A3A")),

		Axis:        lipgloss.NewStyle().Foreground(c("#5F5F5F")),
		AxisLabel:   lipgloss.NewStyle().Foreground(c("#8A8A8A")),
		NVMLUsed:    lipgloss.NewStyle().Foreground(c("#5FD75F")),
		Allocated:   lipgloss.NewStyle().Foreground(c("#00D7FF")),
		Reserved:    lipgloss.NewStyle().Foreground(c("#5F87FF")),
		Peak:        lipgloss.NewStyle().Foreground(c("#FF87FF")),
		LargestFree: lipgloss.NewStyle().Foreground(c("#FFAF00")),

		MarkSnapshot: lipgloss.NewStyle().Foreground(c("#FFD75F")),
		MarkPhase:    lipgloss.NewStyle().Foreground(c("#87AFD7")),
		MarkOOM:      lipgloss.NewStyle().Foreground(c("#FF5F5F")).Bold(true),
		MarkEnded:    lipgloss.NewStyle().Foreground(c("#AF875F")),

		LedgerPart: ledgerPartStyles(),

		TableHeader: lipgloss.NewStyle().Bold(true).Foreground(c("#D7D7FF")),
		Cell:        lipgloss.NewStyle(),
		RowSelected: lipgloss.NewStyle().Bold(true).Foreground(c("#FFFFFF")).Background(c("#303050")),
		Missing:     lipgloss.NewStyle().Foreground(c("#6C6C6C")),

		Status:      lipgloss.NewStyle().Foreground(c("#BCBCBC")),
		StatusError: lipgloss.NewStyle().Foreground(c("#FF5F5F")).Bold(true),
		Prompt:      lipgloss.NewStyle().Foreground(c("#FFD75F")).Bold(true),

		Help: help.DefaultDarkStyles(),
	}
}

// markStyle picks the marker style for a store.Marker kind.
// series is the chart's style for a series.
func (s *Styles) series(k present.SeriesKind) lipgloss.Style {
	switch k {
	case present.TorchReserved, present.FrameworkReserved:
		return s.Reserved
	case present.TorchPeak:
		return s.Peak
	case present.TorchLargestFree:
		return s.LargestFree
	case present.TorchAllocated, present.FrameworkInUse:
		return s.Allocated
	}
	return s.NVMLUsed
}

func (s *Styles) markStyle(kind string) lipgloss.Style {
	switch kind {
	case wire.MarkOOM:
		return s.MarkOOM
	case "ended":
		return s.MarkEnded
	case "phase_start", "phase_end":
		return s.MarkPhase
	}
	return s.MarkSnapshot
}
