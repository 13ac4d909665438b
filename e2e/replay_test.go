package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --replay of a file with nothing loadable in it is an error with the
// loader's message and exit status 1, before any screen is drawn (it opened
// an empty TUI and exited 0); export says the same, exits 1, and leaves the
// CSV path alone.
func TestReplayNothingLoadable(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"notes.txt":   "shopping list\n",
		"empty":       "",
		"header-only": `{"type":"recording","v":2,"start":1764590400000000000}` + "\n" + "{not json\n",
	}
	for name, content := range cases {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stderr := inTerminal(t, binary, "--replay", path)
		if code != 1 || !strings.HasPrefix(stderr, "gputop: "+path+": byte ") || !strings.Contains(stderr, "nothing in it can be replayed") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and the loader's message", name, code, stderr)
		}
		out := filepath.Join(dir, name+".csv")
		os.WriteFile(out, []byte("keep me\n"), 0o644)
		msg, code := run(t, "export", path, "--csv", out)
		if b, _ := os.ReadFile(out); code != 1 || string(b) != "keep me\n" || strings.Contains(msg, "warning") || !strings.Contains(msg, path+": byte ") {
			t.Errorf("export %s: exit %d, %q, CSV now %q", name, code, msg, b)
		}
	}
}

// A corrupt line after some frames: export writes what was read and exits
// 1, and the message is an error, not a warning; a cut-off last line (a
// killed recorder) alone is a warning and exit 0.
func TestExportErrorIsNotAWarning(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.gputop")
	writeRecording(t, rec)
	data, _ := os.ReadFile(rec)
	bad := filepath.Join(dir, "bad.gputop")
	os.WriteFile(bad, append(append([]byte{}, data...), "{not json\n"...), 0o644)
	out := filepath.Join(dir, "s.csv")
	msg, code := run(t, "export", bad, "--csv", out)
	if code != 1 || strings.Contains(msg, "warning") || !strings.Contains(msg, "gputop export: "+bad+": byte ") || !strings.Contains(msg, "(1 row)") {
		t.Errorf("corrupt: exit %d: %s", code, msg)
	}
	cut := filepath.Join(dir, "cut.gputop")
	os.WriteFile(cut, data[:len(data)-3], 0o644)
	msg, code = run(t, "export", cut, "--csv", out)
	if code != 0 || !strings.Contains(msg, "gputop export: warning: "+cut+": byte ") {
		t.Errorf("cut off: exit %d: %s", code, msg)
	}
}

// A recording of a few hundred MB loads while the TUI shows how far it
// got, and q, ctrl+c, SIGTERM or closing the terminal (SIGHUP) during the
// load end gputop at once, writing nothing: with --csv, a quit after the
// load would have written the CSV, so its absence also shows that each came
// before the load finished.
func TestReplayLoadProgressAndQuit(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "big.gputop")
	size := writeBigRecording(t, rec, 300<<20)
	total := fmt.Sprintf("of %.1f MiB (", float64(size)/(1<<20))
	for _, how := range []string{"q", "ctrl+c", "SIGTERM", "SIGHUP"} {
		t.Run(how, func(t *testing.T) {
			out := filepath.Join(dir, how+".csv")
			tm := startTerm(t, 160, 50, "--replay", rec, "--csv", out)
			scr := tm.waitFor(total)
			line := ""
			for _, l := range strings.Split(scr, "\n") {
				if strings.Contains(l, total) {
					line = strings.TrimSpace(l)
				}
			}
			if !strings.HasPrefix(line, "loading "+rec+": ") || !strings.HasSuffix(line, "; q quits") {
				t.Fatalf("no progress line:\n%s", scr)
			}
			t.Logf("%s, then %s", line, how)
			switch how {
			case "q":
				tm.keys("q")
			case "ctrl+c":
				tm.keys("C-c")
			case "SIGTERM":
				syscall.Kill(tm.pid, syscall.SIGTERM)
			case "SIGHUP":
				tm.tmux("kill-session", "-t", tm.name).Run()
			}
			tm.waitExit()
			if _, err := os.Stat("/proc/" + strconv.Itoa(tm.pid)); err == nil {
				t.Fatalf("gputop still running after %s during the load:\n%s", how, tm.screen())
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s during the load wrote %s", how, out)
			}
		})
	}
}

// writeBigRecording writes a recording of about size bytes quickly: one
// device, NVML batches of 4096 samples at 1 kHz in the writer's own form.
func writeBigRecording(t *testing.T, path string, size int) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, `{"type":"recording","v":2,"start":%d,"tool":"test"}`+"\n", base)
	fmt.Fprintln(w, `{"type":"device","index":0,"uuid":"GPU-big","name":"Big GPU","total":85899345920}`)
	const n = 4096
	var tail strings.Builder
	tail.WriteString(`,"dt":[0`)
	for i := 1; i < n; i++ {
		tail.WriteString(",1000000")
	}
	tail.WriteString(`],"used":[1293942784`)
	for i := 1; i < n; i++ {
		tail.WriteString(",0")
	}
	tail.WriteString(`],"reserved":[536870912`)
	for i := 1; i < n; i++ {
		tail.WriteString(",0")
	}
	tail.WriteString("]}\n")
	for i := 0; i*tail.Len() < size; i++ {
		fmt.Fprintf(w, `{"type":"nvml","dev":0,"t0":%d`, base+int64(i)*n*int64(time.Millisecond))
		w.WriteString(tail.String())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// inTerminal runs a command in a tmux terminal of its own and returns its
// exit status and what it wrote on stderr, once it has exited.
func inTerminal(t *testing.T, args ...string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	errFile, rcFile := filepath.Join(dir, "stderr"), filepath.Join(dir, "rc")
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf("%s 2>%s; echo $? >%s.tmp; mv %s.tmp %s; sleep 60", strings.Join(quoted, " "), errFile, rcFile, rcFile, rcFile)
	server, name := newTmuxServer(), "gputop-e2e-sh"
	if out, err := tmuxOn(server, "new-session", "-d", "-s", name, "-x", "160", "-y", "50", "--", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	defer func() {
		tmuxOn(server, "kill-server").Run()
		os.Remove(server) // tmux leaves its socket behind
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(rcFile); err == nil {
			code, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			stderr, _ := os.ReadFile(errFile)
			return code, string(stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := tmuxOn(server, "capture-pane", "-p", "-t", name).Output()
	t.Fatalf("%s did not exit within 10 s; screen:\n%s", strings.Join(args, " "), out)
	return 0, ""
}
