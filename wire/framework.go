package wire

import (
	"errors"
	"fmt"
)

// TypeFramework is the frame of another framework's allocator figures
// (JAX's XLA allocator, CuPy's memory pool) on one device, beside torch's
// samples.
const TypeFramework = "framework"

// Frameworks, as an agent names them.
const (
	FrameworkJAX  = "jax"
	FrameworkCuPy = "cupy"
)

// Figures gputop knows a framework's allocator by; a framework maps its
// own counters onto them (JAX's bytes_in_use is the in-use figure) and
// keeps its own name beside each (Figure.Native). A figure the framework
// does not report is absent, never 0.
const (
	FigInUse    = "in_use"   // bytes of live arrays (JAX bytes_in_use, CuPy used_bytes)
	FigReserved = "reserved" // bytes the allocator holds from the device (JAX pool_bytes / bytes_reserved, CuPy total_bytes)
	FigPeak     = "peak"     // the most in use so far (JAX peak_bytes_in_use)
	FigLimit    = "limit"    // the most the allocator may hold (JAX bytes_limit, CuPy get_limit())
)

// Bounds on what an agent may say of its frameworks (wire.Check).
const (
	MaxFrameworks     = 4  // frameworks on one device
	MaxFigures        = 16 // figures of one framework
	MaxFrameworkText  = 64 // bytes of a framework's or a figure's name
	MaxFrameworkHeld  = 16 // holder groups of one framework's end-row attribution
	MaxFrameworkNotes = 8  // settings of one framework
)

// Figure is one of a framework's counters: Of is gputop's figure it
// stands for (FigInUse ...), "" for one only the framework has
// (largest_alloc_size, num_allocs, the pinned pool); Native the
// framework's own name for it.
type Figure struct {
	Of     string `json:"of,omitempty"`
	Native string `json:"native"`
	Value  uint64 `json:"value"`
}

// Framework is one framework's allocator on one device of a process, in
// its own figures. Settings are those of its allocator in force in the
// process (JAX: the XLA_PYTHON_CLIENT_* variables as the process had
// them). Held, on an end row only, is what holds its memory as the
// framework can tell (JAX: its live arrays grouped by shape and dtype,
// or by the variable that holds them; CuPy: its arrays in use).
type Framework struct {
	Name     string        `json:"name"`
	Figures  []Figure      `json:"figures"`
	Settings []Setting     `json:"settings,omitempty"`
	Held     []HolderGroup `json:"held,omitempty"`
}

// Get returns the figure standing for gputop's figure of.
func (f Framework) Get(of string) (Figure, bool) {
	for _, g := range f.Figures {
		if g.Of == of {
			return g, true
		}
	}
	return Figure{}, false
}

// Setting returns the value of a setting by name ("" when not set).
func (f Framework) Setting(name string) (string, bool) {
	for _, s := range f.Settings {
		if s.Name == name {
			return s.Value, true
		}
	}
	return "", false
}

// FrameworkReading is the frame an agent sends with the figures of each
// framework other than torch on device Dev (torch's index; the device's
// own ordinal where torch has not initialised it), at the agent's send
// interval.
type FrameworkReading struct {
	Type       string      `json:"type"`
	PID        int         `json:"pid,omitempty"`
	T          int64       `json:"t"`
	Dev        int         `json:"dev"`
	Frameworks []Framework `json:"frameworks"`
}

func checkFrameworkReading(v *FrameworkReading) error {
	return firstErr(checkTime(v.T), checkDev("dev", v.Dev), checkFrameworks("frameworks", v.Frameworks))
}

// checkFrameworks holds a list of frameworks to its bounds.
func checkFrameworks(where string, fs []Framework) error {
	if len(fs) > MaxFrameworks {
		return fmt.Errorf("%q lists %d frameworks, more than %d", where, len(fs), MaxFrameworks)
	}
	for i, f := range fs {
		at := fmt.Sprintf("%s[%d]", where, i)
		switch {
		case f.Name == "":
			return fmt.Errorf("%q has no name", at)
		case len(f.Name) > MaxFrameworkText:
			return fmt.Errorf("%q: name is %d bytes, more than %d", at, len(f.Name), MaxFrameworkText)
		case len(f.Figures) > MaxFigures:
			return fmt.Errorf("%q has %d figures, more than %d", at, len(f.Figures), MaxFigures)
		case len(f.Settings) > MaxFrameworkNotes:
			return fmt.Errorf("%q has %d settings, more than %d", at, len(f.Settings), MaxFrameworkNotes)
		case len(f.Held) > MaxFrameworkHeld:
			return fmt.Errorf("%q has %d holder groups, more than %d", at, len(f.Held), MaxFrameworkHeld)
		}
		for j, g := range f.Figures {
			if g.Native == "" || len(g.Native) > MaxFrameworkText || len(g.Of) > MaxFrameworkText {
				return fmt.Errorf("%q.figures[%d]: a name is empty or longer than %d bytes", at, j, MaxFrameworkText)
			}
		}
		for j, s := range f.Settings {
			if len(s.Name) > MaxFrameworkText || len(s.Value) > MaxSettingBytes {
				return fmt.Errorf("%q.settings[%d] is longer than %d bytes", at, j, MaxSettingBytes)
			}
		}
		for j, g := range f.Held {
			if len(g.Name) > MaxSettingBytes || len(g.Kind) > MaxFrameworkText || len(g.Examples) > 4 {
				return fmt.Errorf("%q.held[%d]: name over %d bytes, kind over %d or more than 4 examples", at, j, MaxSettingBytes, MaxFrameworkText)
			}
		}
	}
	return nil
}

var errNoTorchFigures = errors.New(`"no_torch" with torch figures that are not 0`)
