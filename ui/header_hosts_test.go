package ui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/gputop/gputop/store"
)

// A host's line says what the bounds on its stream left out, beside its
// state, connected or not.
func TestHeaderHostLimited(t *testing.T) {
	st := DefaultStyles()
	m := newHeader(&st)
	m.SetSize(160, 4)
	m.SetHosts([]store.Host{
		{ID: 1, Name: "node1", Up: true, Limited: "left out 3 devices past its share of 512"},
		{ID: 2, Name: "node2", Up: true},
		{ID: 3, Name: "node3", Reason: "ssh node3 exited with status 255", Limited: "left out 1 hello over 64.0 KiB"},
	})
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	for i, want := range []string{
		"node1 connected (left out 3 devices past its share of 512)",
		"node2 connected",
		"node3 disconnected: ssh node3 exited with status 255 (left out 1 hello over 64.0 KiB)",
	} {
		if strings.TrimRight(lines[i], " ") != want {
			t.Errorf("line %d %q, want %q", i, lines[i], want)
		}
	}
}
