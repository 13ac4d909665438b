package wire

import (
	"errors"
	"fmt"
)

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

// MaxOOMErrorBytes bounds a framework's OOM message in an oom frame.
const MaxOOMErrorBytes = 1024

func checkFrameworkOOM(v *OOM) error {
	if len(v.Framework) > MaxFrameworkText {
		return fmt.Errorf(`"framework" is %d bytes, more than %d`, len(v.Framework), MaxFrameworkText)
	}
	if len(v.Error) > MaxOOMErrorBytes {
		return fmt.Errorf(`"error" is %d bytes, more than %d`, len(v.Error), MaxOOMErrorBytes)
	}
	return checkFrameworks("frameworks", v.Frameworks)
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
