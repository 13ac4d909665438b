package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A number or duration flag out of its range is refused before anything
// starts: exit 2, a line naming the flag and the value given, and the
// output it would have written not created. NaN passes a plain "<= 0"
// test, a tiny rate overflowed the sampling period into a busy loop, and
// a duration of -5s recorded until Ctrl-C.
func TestBadNumberFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gputop")
	sock := filepath.Join(dir, "s.sock")
	rec := []string{"record", "-o", out, "--source", "agent", "--socket", sock}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(rec, "--duration", "-5s"), "--duration -5s: want a positive duration"},
		{append(rec, "--duration", "0s"), "--duration 0s: want a positive duration"},
		{append(rec, "--rate", "NaN"), "--rate NaN: want 1 <= rate <= 10000"},
		{append(rec, "--rate", "1e-10"), "--rate 1e-10: want 1 <= rate <= 10000"},
		{append(rec, "--proc-rate", "nan"), "--proc-rate NaN: want 0.1 <= rate <= 1000"},
		{[]string{"serve", "--source", "agent", "--socket", sock, "--rate", "nan"}, "--rate NaN: want"},
		{[]string{"dump-info", "../testdata/memdump/labelled.pickle", "--top", "-3"}, "--top -3: want a number of frames, 0 for all"},
		{append(rec, "--alert", "true", "--alert-steps", "NaN"), "--alert-steps NaN: want 0 (never by steps) or a number of steps"},
		{append(rec, "--alert", "true", "--alert-steps", "-1"), "--alert-steps -1: want 0 (never by steps) or a number of steps"},
		{append(rec, "--alert", "true", "--alert-within", "-1m"), "--alert-within -1m0s: want 0 (never by time) or a duration"},
		{append(rec, "--alert", "true", "--alert-timeout", "0s"), "--alert-timeout 0s: want 1s to 1h"},
		{append(rec, "--alert", " "), "--alert: an empty command"},
		{append(rec, "--alert-steps", "5"), "--alert-steps 5: it configures --alert, which is not given"},
	} {
		// a flag taken instead of refused would start a recorder that runs
		// until killed
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, binary, c.args...)
		msg, err := cmd.CombinedOutput()
		cancel()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(msg), c.want) {
			t.Errorf("gputop %s: %v, %q; want exit 2 and %q", strings.Join(c.args, " "), err, msg, c.want)
		}
		for _, p := range []string{out, sock} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("gputop %s created %s", strings.Join(c.args, " "), p)
				os.Remove(p)
			}
		}
	}
}
