package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		b    uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB"},
		{500 * mib, "500.0 MiB"},
		{1*gib + 256*mib, "1.25 GiB"},
		{h200, "140.4 GiB"},
	} {
		if got := humanBytes(c.b); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.b, got, c.want)
		}
	}
	if got := optHuman(nil); got != dash {
		t.Errorf("optHuman(nil) = %q, want a dash, never 0", got)
	}
	if got := signedHuman(-512 * mib); got != "-512.0 MiB" {
		t.Errorf("signedHuman = %q", got)
	}
}

func TestNiceCeilAndAxis(t *testing.T) {
	for _, c := range []struct {
		v, want float64
	}{
		{7.84 * gib, 8 * gib},
		{2.61 * gib, 3 * gib},
		{1.01 * gib, 1.2 * gib},
		{300 * mib, 300 * mib},
		{301 * mib, 400 * mib},
	} {
		div, _ := yUnit(c.v)
		if got := niceCeil(c.v, div); got != c.want {
			t.Errorf("niceCeil(%.3g) = %.4g, want %.4g", c.v, got, c.want)
		}
	}
	if got := axisBytes(4*gib, 8*gib, 2*gib, 8); got != "   4 GiB" {
		t.Errorf("axisBytes whole step = %q", got)
	}
	if got := axisBytes(2.5*gib, 7.5*gib, 2.5*gib, 8); got != " 2.5 GiB" {
		t.Errorf("axisBytes half step = %q", got)
	}
	if got := axisBytes(0, 8*gib, 2*gib, 8); got != "       0" {
		t.Errorf("axisBytes zero = %q", got)
	}
	if got := axisBytes(200*mib, 800*mib, 200*mib, 8); got != " 200 MiB" {
		t.Errorf("axisBytes MiB = %q", got)
	}
}

func TestRelTimeAndElapsed(t *testing.T) {
	for _, c := range []struct {
		sec, win float64
		want     string
	}{
		{-60, 60, "-60s"},
		{-0.2, 60, "0"},
		{-2.5, 10, "-2.5s"},
		{-270, 300, "-4m30s"},
		{-3600, 7200, "-1h00m"},
	} {
		if got := relTime(c.sec, c.win); got != c.want {
			t.Errorf("relTime(%v, %v) = %q, want %q", c.sec, c.win, got, c.want)
		}
	}
	if got := elapsed(83*time.Second + 450*time.Millisecond); got != "0:01:23.4" {
		t.Errorf("elapsed = %q", got)
	}
	if got := elapsed(-time.Second); got != "0:00:00.0" {
		t.Errorf("elapsed of a negative duration = %q", got)
	}
	if got := zoomName(0); got != "whole run" {
		t.Errorf("zoomName(0) = %q", got)
	}
	if got := speedName(0.25); got != "0.25x" {
		t.Errorf("speedName = %q", got)
	}
}

func TestFitNeverExceedsTheBox(t *testing.T) {
	s := "a very long line that does not fit\nshort\nthird\nfourth"
	got := fit(s, 10, 3)
	lines := strings.Split(got, "\n")
	if len(lines) != 3 {
		t.Fatalf("fit gave %d lines, want 3", len(lines))
	}
	for _, l := range lines {
		if w := ansi.StringWidth(l); w > 10 {
			t.Errorf("line %q is %d cells wide, want <= 10", l, w)
		}
	}
	if got := fit("x", 5, 3); strings.Count(got, "\n") != 2 {
		t.Errorf("fit does not pad to the height: %q", got)
	}
}
