// torch's cache in words: a layout (wire.Layout) as the row details, the
// process pane, `gputop export` and the OOM explanation write it.

package summary

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// FragmentationFormula names what the fragmentation percentage is, where
// a help or a legend explains it.
const FragmentationFormula = "fragmentation = 1 − largest free block ÷ free in torch's cache"

// LayoutOld is how much older than its row a layout may be before the row
// says when it was read: the agent reads one about once a second.
const LayoutOld = 2 * time.Second

// What a line lists of a layout at most: its largest pools and its
// settings, each text cut to layoutTextRunes (the wire allows 32 of each,
// of 256 bytes).
const (
	layoutPools     = 4
	layoutSettings  = 6
	layoutTextRunes = 40
)

// RowLayout is the layout a row carries: its own, or on an OOM's row the
// one read at the OOM (rows recorded before rows carried it).
func RowLayout(r wire.Row) *wire.Layout {
	if r.Layout != nil {
		return r.Layout
	}
	if r.OOM != nil {
		return r.OOM.Layout
	}
	return nil
}

// CacheFigures are a layout's measured figures: "6.00 GiB free in
// segments, largest free block 512.0 MiB, fragmentation 91.7%".
func CacheFigures(l wire.Layout) string {
	return fmt.Sprintf("%s free in segments, largest free block %s, fragmentation %s",
		units.Bytes(l.FreeInSegments), units.Bytes(l.LargestFree), Percent(l.Fragmentation()))
}

// Percent writes a fraction of 1 as a percentage with one decimal.
func Percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// PoolsText lists a layout's pools by reserved bytes, the largest first
// as the agent sent them: "pools: default 70.00 GiB, graph 1,2 4.00 GiB
// (+3 more)"; "all in the default pool" when that is the only one, ""
// when the reading listed none.
func PoolsText(l wire.Layout) string {
	if len(l.Pools) == 0 {
		return ""
	}
	if len(l.Pools) == 1 && l.Pools[0].Kind == wire.PoolDefault && l.PoolsCut == 0 {
		return "all in the default pool"
	}
	var ps []string
	for _, p := range l.Pools[:min(len(l.Pools), layoutPools)] {
		name := clip(p.Kind)
		if p.Kind != wire.PoolDefault {
			name += " " + clip(p.ID)
		}
		ps = append(ps, name+" "+units.Bytes(p.Reserved))
	}
	s := "pools: " + strings.Join(ps, ", ")
	if n := len(l.Pools) - layoutPools + l.PoolsCut; n > 0 {
		s += fmt.Sprintf(" (+%d more)", n)
	}
	return s
}

// SettingsText says which allocator settings were in force, and how gputop
// knows: "settings in force (torch's): expandable_segments:False,
// max_split_size_mb:512", or what the environment asked for when torch
// did not say ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True asked
// for; whether in force not known"), or "allocator settings not known".
func SettingsText(s *wire.AllocSettings) string {
	if s == nil {
		return "allocator settings not known"
	}
	if s.From == "env" {
		env := clip(s.Env)
		if env == "" {
			env = "the environment"
		}
		if s.Conf == "" {
			return env + " not set (torch did not say which settings are in force)"
		}
		return env + "=" + clip(s.Conf) + " asked for (torch did not say whether in force)"
	}
	var items []string
	if s.Expandable != nil {
		items = append(items, fmt.Sprintf("expandable_segments:%s", pyBool(*s.Expandable)))
	}
	for _, it := range s.Items {
		if it.Name == "expandable_segments" {
			continue
		}
		items = append(items, clip(it.Name)+":"+clip(it.Value))
	}
	if len(items) == 0 {
		return "settings in force (torch's): torch's defaults"
	}
	text := "settings in force (torch's): " + strings.Join(items[:min(len(items), layoutSettings)], ", ")
	if n := len(items) - layoutSettings; n > 0 {
		text += fmt.Sprintf(" (+%d more)", n)
	}
	return text
}

// LayoutText is a layout in one line of clauses: its figures, its pools,
// its settings, and when it is older than LayoutOld at time at (of what
// the words of, "the row", "the cursor"), how much older: "read 12.3s
// before the row".
func LayoutText(l wire.Layout, at int64, of string) string {
	parts := []string{CacheFigures(l)}
	if p := PoolsText(l); p != "" {
		parts = append(parts, p)
	}
	parts = append(parts, SettingsText(l.Settings))
	if age := time.Duration(at - l.T); age >= LayoutOld {
		parts = append(parts, "read "+age.Round(100*time.Millisecond).String()+" before "+of)
	}
	return strings.Join(parts, "; ")
}

// RowLayoutText is a row's layout in words for its details and `gputop
// export`: "torch's cache at this row: ...", or "" without one.
func RowLayoutText(r wire.Row) string {
	l := RowLayout(r)
	if l == nil {
		return ""
	}
	return "torch's cache at this row: " + LayoutText(*l, r.T, "the row")
}

// expandable says whether expandable_segments was in force and how gputop
// knows, for the fragmentation suggestion: measured from the segments
// (expandable ones are there), torch's settings, the environment's (what
// was asked for), or not at all; short in fewer words.
func expandable(l wire.Layout) (inForce bool, how, short string) {
	s := l.Settings
	switch {
	case l.Expandable:
		return true, "measured: the segments are expandable", "measured"
	case s == nil:
		return false, "not known: the reading gave no settings", "not known"
	case s.From == "torch" && s.Expandable != nil && *s.Expandable:
		return true, "torch's settings", "torch's settings"
	case s.From == "torch" && s.Expandable != nil:
		return false, "not in force", "not in force"
	case s.From == "torch":
		return false, "not known: torch's settings did not name it", "not known"
	}
	env := clip(s.Env)
	if env == "" {
		env = "the environment"
	}
	asked := strings.Contains(strings.ReplaceAll(s.Conf, " ", ""), "expandable_segments:True")
	if s.Expandable != nil {
		asked = *s.Expandable
	}
	if asked {
		return false, "asked for in " + env + "; whether in force not known", "asked for, not known in force"
	}
	return false, "not asked for in " + env, "not asked for"
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// clip cuts text from outside to layoutTextRunes runes, with "…" where it
// cut.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= layoutTextRunes {
		return s
	}
	r := []rune(s)
	return string(r[:layoutTextRunes-1]) + "…"
}
