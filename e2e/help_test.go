package e2e

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// flagLine is a flag as --help prints it: "  --name ARG" ("  -o FILE").
var flagLine = regexp.MustCompile(`^  (--?)([a-z.-]+)(?: (\S+))?$`)

// Every subcommand's --help names each flag's argument as the usage lines
// and the README do (the flag package takes it from a back-quoted word in
// the flag's text, else from its Go type): no "-csv e", no "-socket string".
func TestHelpNamesEveryFlagArgument(t *testing.T) {
	want := map[string]map[string]string{
		"": {"csv": "PATH", "demo": "", "fps": "N", "proc-rate": "HZ", "rate": "HZ", "record": "FILE",
			"replay": "FILE", "socket": "PATH", "source": "S", "ssh": "HOSTS", "ssh-gputop": "CMD", "metrics": "ADDR", "metrics-window": "DUR", "web.config.file": "PATH"},
		"record": {"comment": "TEXT", "duration": "D", "force": "", "o": "FILE", "metrics": "ADDR", "metrics-window": "DUR", "web.config.file": "PATH",
			"proc-rate": "HZ", "rate": "HZ", "socket": "PATH", "source": "S", "ssh": "HOSTS", "ssh-gputop": "CMD"},
		"serve": {"proc-rate": "HZ", "rate": "HZ", "socket": "PATH", "source": "S", "stdio": "",
			"metrics": "ADDR", "metrics-window": "DUR", "web.config.file": "PATH", "o": "FILE", "force": ""},
		"export":    {"csv": "OUT"},
		"snap":      {"end": "", "socket": "PATH"},
		"status":    {"json": "", "socket": "PATH"},
		"dump-info": {"top": "N"},
		"run": {"csv": "PATH", "force": "", "fps": "N", "history": "N", "metrics": "ADDR", "metrics-window": "DUR", "web.config.file": "PATH", "no-tui": "", "proc-rate": "HZ",
			"rate": "HZ", "record": "FILE", "socket": "PATH", "source": "S"},
		"fit": {"values": "LIST", "memory": "SIZE", "margin": "PERCENT", "stable-steps": "N", "stable-seconds": "S", "max-seconds": "S",
			"stop-seconds": "S", "step": "N", "verify": "", "json": "FILE", "show-output": ""},
	}
	// --alert's, on every live command
	for _, sub := range []string{"", "record", "serve", "run"} {
		for f, arg := range map[string]string{"alert": "CMD", "alert-steps": "N", "alert-within": "DUR", "alert-timeout": "DUR"} {
			want[sub][f] = arg
		}
	}
	for sub, flags := range want {
		args := []string{"--help"}
		if sub != "" {
			args = []string{sub, "--help"}
		}
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gputop %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		text := string(out)
		if !strings.Contains(text, "\nFlags:\n") {
			t.Errorf("gputop %s: no Flags: section:\n%s", strings.Join(args, " "), text)
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(text, "\n") {
			m := flagLine.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			dashes, name, arg := m[1], m[2], m[3]
			seen[name] = true
			if (len(name) > 1) != (dashes == "--") {
				t.Errorf("gputop %s: %q: want --%s (-%s for a one-letter flag), as the usage lines write it", strings.Join(args, " "), l, name, name)
			}
			exp, ok := flags[name]
			switch {
			case !ok:
				t.Errorf("gputop %s shows -%s, a flag this test does not know", strings.Join(args, " "), name)
			case arg != exp:
				t.Errorf("gputop %s: %q names its argument %q, want %q", strings.Join(args, " "), l, arg, exp)
			}
		}
		for name := range flags {
			if !seen[name] {
				t.Errorf("gputop %s does not show -%s:\n%s", strings.Join(args, " "), name, text)
			}
		}
	}
}

// gputop help prints the usage on standard output; gputop help COMMAND and
// gputop COMMAND --help print that command's own usage lines (not every
// command's) and its flags.
func TestHelpCommand(t *testing.T) {
	out, err := exec.Command(binary, "help").Output()
	if err != nil || !strings.Contains(string(out), "gputop dump-info FILE") || !strings.Contains(string(out), "gputop help [COMMAND]") {
		t.Errorf("gputop help: %v, want the usage on stdout:\n%s", err, out)
	}
	for _, args := range [][]string{{"help", "record"}, {"record", "--help"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		text := string(out)
		if err != nil || !strings.HasPrefix(text, "Usage:\n  gputop record -o FILE") || !strings.Contains(text, "\nFlags:\n  --alert CMD") ||
			!strings.Contains(text, "\n  -o FILE\n") || strings.Contains(text, "gputop fit") || strings.Contains(text, "gputop dump-info") {
			t.Errorf("gputop %s: %v, want record's usage and flags only:\n%s", strings.Join(args, " "), err, text)
		}
	}
	out, err = exec.Command(binary, "help", "nosuch").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `gputop help: no command "nosuch"`) {
		t.Errorf("gputop help nosuch: %v, %q; want exit 2 naming it", err, out)
	}
}

// Every command's --help (and -h, and gputop help COMMAND, which prints the
// same on standard output) shows its own usage line once, no other
// command's, then its flags, each written --name: a usage that repeated its
// synopsis under the global one read as two commands.
func TestEveryCommandsHelp(t *testing.T) {
	// every command the usage lists (a command added is tested here too)
	out, err := exec.Command(binary, "help").Output()
	if err != nil {
		t.Fatalf("gputop help: %v", err)
	}
	var commands []string
	for _, m := range regexp.MustCompile(`(?m)^  gputop ([a-z][a-z-]*)`).FindAllStringSubmatch(string(out), -1) {
		commands = append(commands, m[1])
	}
	if len(commands) < 9 {
		t.Fatalf("gputop help lists %v, want run, fit, record, serve, export, snap, dump-info, help, version at least", commands)
	}
	for _, c := range commands {
		flagged := c != "help" && c != "version"
		var texts []string
		for _, args := range [][]string{{c, "--help"}, {c, "-h"}, {"help", c}} {
			cmd := exec.Command(binary, args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Errorf("gputop %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
				continue
			}
			text := stdout.String() + stderr.String()
			if args[0] == "help" && stderr.Len() > 0 {
				t.Errorf("gputop help %s wrote on standard error:\n%s", c, stderr.String())
			}
			texts = append(texts, text)
			// the usage, before the flags and an example: the command's
			// line once, and no other command's
			head, _, _ := strings.Cut(text, "\nFlags:")
			head, _, _ = strings.Cut(head, "\nExample:")
			synopsis := 0
			for _, l := range strings.Split(head, "\n") {
				if l := strings.TrimSpace(l); strings.HasPrefix(l, "gputop "+c+" ") || l == "gputop "+c {
					synopsis++
				}
			}
			if !strings.HasPrefix(text, "Usage:\n  gputop "+c) || synopsis != 1 {
				t.Errorf("gputop %s: want \"Usage:\" then the command's line, once (%d times):\n%s", strings.Join(args, " "), synopsis, text)
			}
			for _, other := range commands {
				if other != c && strings.Contains(head, "gputop "+other) {
					t.Errorf("gputop %s shows %s's usage:\n%s", strings.Join(args, " "), other, text)
				}
			}
			if flagged != strings.Contains(text, "\nFlags:\n  -") {
				t.Errorf("gputop %s: a Flags: section is expected exactly when the command has flags:\n%s", strings.Join(args, " "), text)
			}
			if regexp.MustCompile(`(?m)^  -[a-z][a-z.-]+`).MatchString(text) {
				t.Errorf("gputop %s: a flag written -name (want --name):\n%s", strings.Join(args, " "), text)
			}
		}
		for _, x := range texts[1:] {
			if x != texts[0] {
				t.Errorf("gputop %s: --help, -h and gputop help %s differ:\n%s\n---\n%s", c, c, texts[0], x)
			}
		}
	}
}
