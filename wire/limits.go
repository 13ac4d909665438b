package wire

import (
	"time"
	"unicode/utf8"
)

// MaxClockSkew bounds how far the time of a frame from a peer may be from
// gputop's clock. Agents run on the same machine and stamp frames with the
// same clock, so a time further off is a broken or hostile peer. A
// recording holds times up to this much before its header's start, so
// whatever gputop admitted live loads again.
const MaxClockSkew = 24 * time.Hour

// MaxLabelBytes bounds a row's label (a mark's, a snap's, a
// key's, a rename, a recording's row): a label is drawn in the table and
// the chart at every frame and becomes a CSV cell, and names a moment in a
// few words. A longer one is cut (CutLabel), visibly.
const MaxLabelBytes = 256

// MaxMarkRows bounds the rows one mark makes (one per device it lists):
// more GPUs than any one process sees, and a bound on what one frame can
// make a recording write (each row repeats the mark's label and dump).
// The devices past it, in the mark's order, get no row.
const MaxMarkRows = 64

// LabelCut ends a label cut to MaxLabelBytes, so the cut shows.
const LabelCut = "…"

// Prefix returns at most n bytes of s, cut at a UTF-8 character boundary.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Bounds on a Layout from a peer: the pools it lists (largest first; more
// are counted in PoolsCut), the settings, and the length of a setting's
// name and value, of the variable's value and of a skip reason. A pool
// id is two integers.
const (
	MaxPools        = 32
	MaxSettings     = 32
	MaxSettingBytes = 256
	MaxPoolIDBytes  = 48
)

// MaxUncounted bounds a ledger's list of what its walk could not count;
// each entry is at most MaxSettingBytes.
const MaxUncounted = 8
