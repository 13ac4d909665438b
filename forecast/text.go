// A forecast in words, the same in the TUI, export, run's summary and
// alerts.

package forecast

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Text is the forecast in one line: its head, the figures behind it and,
// for an OOM, what grows.
func (f Forecast) Text() string {
	s := f.Head()
	if d := f.Detail(); d != "" {
		s += ": " + d
	}
	if f.Status == OOM {
		s += "; cause: " + f.CauseText()
	}
	return s
}

// Head is the conclusion: "OOM in about 120 steps (95–160) at this rate",
// "stable", "not enough data yet (3 of 6 step rows)".
func (f Forecast) Head() string {
	switch f.Status {
	case NotEnough:
		if f.Have == "" {
			return "not enough data yet"
		}
		return "not enough data yet (" + f.Have + ")"
	case Stable:
		return "stable"
	}
	if f.Limit == 0 {
		return "growing " + f.perUnit(f.Growth) + "; the memory it can have is unknown"
	}
	if f.In < 0.5 {
		return "OOM at the " + f.next() + " at this rate"
	}
	lo, hi := f.count(f.InLo, false), f.count(f.InHi, false)
	if lo == hi {
		return "OOM in about " + f.count(f.In, true) + " at this rate"
	}
	return "OOM in about " + f.count(f.In, true) + " (" + lo + "–" + hi + ") at this rate"
}

// Short is the conclusion for a narrow cell: "OOM ~120 steps", "stable",
// "…" (not enough data).
func (f Forecast) Short() string {
	switch {
	case f.Status == NotEnough:
		return "…"
	case f.Status == Stable:
		return "stable"
	case f.Limit == 0:
		return "growing"
	case f.In < 0.5:
		return "OOM next " + f.unitWord(1)
	}
	return "OOM ~" + f.count(f.In, true)
}

// Detail is the figures behind the conclusion: the growth and its trend,
// what is left of the limit and whose limit it is, and when.
func (f Forecast) Detail() string {
	switch f.Status {
	case NotEnough:
		return ""
	case Stable:
		s := f.span() + ", baseline " + units.Bytes(f.Base) + ", peak " + units.Bytes(f.Peak)
		if f.Limit > 0 {
			s += " of " + units.Bytes(f.Limit)
		}
		return s
	}
	s := f.perUnit(f.Growth) + " (" + f.Trend + ")"
	if f.Limit == 0 {
		return s
	}
	left := uint64(0)
	if f.Limit > f.Peak {
		left = f.Limit - f.Peak
	}
	s += ", " + units.Bytes(left) + " left of " + f.limitText()
	if w := f.When(); w != "" {
		s += ", " + w
	}
	return s
}

// When is when an OOM forecast puts the OOM, beyond how many units: "near
// step 1,320, ~4 min" ("" when there is nothing more to say).
func (f Forecast) When() string {
	if f.Status != OOM || f.Limit == 0 || f.In < 0.5 {
		return ""
	}
	var w []string
	if f.Unit == Steps {
		w = append(w, "near step "+thousands(math.Round(f.Last+f.In)))
	}
	if secs, ok := f.SecondsToOOM(); ok && f.Unit != Seconds {
		w = append(w, "~"+Duration(secs))
	}
	return strings.Join(w, ", ")
}

// limitText is the limit and where it comes from.
func (f Forecast) limitText() string {
	if f.LimitFrom == "" {
		return units.Bytes(f.Limit)
	}
	return units.Bytes(f.Limit) + " (" + f.LimitFrom + ")"
}

// CauseText says what grows: "other tensors +120 MiB an epoch, held by
// `losses`"; without ledgers at the rows, "unknown (no ledger at the
// rows)", with the holder the walks name when there is one.
func (f Forecast) CauseText() string {
	c := f.Cause
	var s string
	if c.Part == "" {
		s = "unknown (no ledger at the rows)"
		if c.Ledgers == 1 {
			s = "unknown (one row carries a ledger; two are needed)"
		}
		switch {
		case c.Holder != "" && c.Largest:
			s += "; the largest holder outside the model and its optimizer at the last holders walk: `" + c.Holder + "`"
		case c.Holder != "":
			s += "; `" + c.Holder + "` grew " + units.Bytes(c.HolderGrowth) + " between the holders walks"
		}
		return s
	}
	s = PartName(c.Part) + " " + f.perUnit(c.Growth)
	switch {
	case c.Holder != "" && c.Largest:
		s += ", held by `" + c.Holder + "` (the largest such holder at the last holders walk)"
	case c.Holder != "":
		s += ", held by `" + c.Holder + "` (+" + units.Bytes(c.HolderGrowth) + " between the holders walks)"
	}
	return s
}

// PartName is a ledger part in words.
func PartName(part string) string {
	switch part {
	case wire.PartParams:
		return "parameters"
	case wire.PartGrads:
		return "gradients"
	case wire.PartOptimizer:
		return "optimizer state"
	case wire.PartActivations:
		return "activations"
	case wire.PartOtherTensors:
		return "other tensors"
	case wire.PartWorkspace:
		return "cuBLAS workspaces"
	case wire.PartUnattributed:
		return "memory no tensor accounts for"
	}
	return part
}

// perUnit is a growth in bytes a unit: "+12.0 MiB a step", "+1.2 MiB a
// minute" (a Seconds forecast counts by the minute).
func (f Forecast) perUnit(b float64) string {
	per := map[Unit]string{Steps: "a step", Epochs: "an epoch", Seconds: "a minute"}[f.Unit]
	if f.Unit == Seconds {
		b *= 60
	}
	return "+" + units.Bytes(uint64(max(b, 0))) + " " + per
}

// unitWord is the unit's name for n of it.
func (f Forecast) unitWord(n float64) string {
	w := map[Unit]string{Steps: "step", Epochs: "epoch", Seconds: "second"}[f.Unit]
	if n != 1 {
		w += "s"
	}
	return w
}

// next is the unit's next one: "next step", "next epoch", "next second".
func (f Forecast) next() string { return "next " + f.unitWord(1) }

// count is n of the forecast's unit: "120 steps" (named) or "120"; a
// Seconds forecast as a duration.
func (f Forecast) count(n float64, named bool) string {
	if f.Unit == Seconds {
		return Duration(n)
	}
	if math.IsInf(n, 0) || n > 1e12 {
		return "∞"
	}
	r := math.Max(math.Round(n), 1)
	if !named {
		return thousands(r)
	}
	return thousands(r) + " " + f.unitWord(r)
}

// span is what the points cover: "steps 100–1,200 (12 rows)", "the
// last 5 min".
func (f Forecast) span() string {
	if f.Unit == Seconds {
		return "the last " + Duration(f.Last-f.First)
	}
	return fmt.Sprintf("%s %s–%s (%d rows)", f.unitWord(2), thousands(f.First), thousands(f.Last), f.Points)
}

// Duration is seconds in the unit that reads best: "45 s", "12 min",
// "3.5 h", "2.1 days".
func Duration(secs float64) string {
	switch {
	case math.IsInf(secs, 0) || secs > 1e12:
		return "∞"
	case secs < 90:
		return fmt.Sprintf("%.0f s", math.Max(secs, 1))
	case secs < 90*60:
		return fmt.Sprintf("%.0f min", secs/60)
	case secs < 48*3600:
		return fmt.Sprintf("%.1f h", secs/3600)
	}
	return fmt.Sprintf("%.1f days", secs/86400)
}

// thousands writes a whole number with thousands separators: 1,234,567.
func thousands(n float64) string {
	s := strconv.FormatFloat(n, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
