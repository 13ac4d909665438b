package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A build without cgo (no C compiler: Go then turns cgo off by itself)
// stops with one line that says what to do, not go-nvml's "undefined:
// Return" and a hundred more.
func TestBuildWithoutCgoSaysWhatToDo(t *testing.T) {
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "gputop"), "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("CGO_ENABLED=0 go build succeeded:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "gputop_needs_cgo/install_a_C_compiler_and_build_with/CGO_ENABLED_1") {
		t.Fatalf("CGO_ENABLED=0 go build printed %d lines, want one naming a C compiler and CGO_ENABLED=1:\n%s", len(lines), out)
	}
}
