// Package runner starts the command of `gputop run` with gputop's agent
// injected: a private directory holding a sitecustomize (put at the front
// of PYTHONPATH) and the agent socket, the agent package found beside the
// binary, what the command's Python processes reported back, the
// command's output kept for a pane, and how the command ended.
package runner

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

//go:embed sitecustomize.py
var siteCustomize []byte

// Injection is the private directory of one `gputop run`.
type Injection struct {
	Dir      string // sitecustomize.py, the events file, and the socket
	Socket   string // where gputop listens for the command's agents
	AgentDir string // the directory holding the `gputop` package; "" when none was found
}

// Prepare makes the private directory (0700, under $TMPDIR) and writes the
// sitecustomize into it. agentDir is FindAgent's answer.
func Prepare(agentDir string) (*Injection, error) {
	dir, err := os.MkdirTemp("", "gputop-run-")
	if err != nil {
		return nil, fmt.Errorf("cannot make a private directory for the agent's sitecustomize: %w", err)
	}
	in := &Injection{Dir: dir, Socket: filepath.Join(dir, "gputop.sock"), AgentDir: agentDir}
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), siteCustomize, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("cannot write the agent's sitecustomize in %s: %w", dir, err)
	}
	return in, nil
}

// Remove deletes the private directory.
func (in *Injection) Remove() { os.RemoveAll(in.Dir) }

// Env is env (KEY=VALUE) with the injection: the private directory first on
// PYTHONPATH (an existing PYTHONPATH follows it unchanged, and a
// sitecustomize found there still runs: ours runs it), the socket, the
// agent's directory and the events file.
func (in *Injection) Env(env []string) []string {
	pp := in.Dir
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PYTHONPATH":
			if v != "" {
				pp += string(os.PathListSeparator) + v
			}
		case "GPUTOP_SOCKET", "GPUTOP_AGENT_PATH", "GPUTOP_RUN_DIR":
		default:
			out = append(out, kv)
		}
	}
	out = append(out, "PYTHONPATH="+pp, "GPUTOP_SOCKET="+in.Socket, "GPUTOP_RUN_DIR="+in.Dir)
	if in.AgentDir != "" {
		out = append(out, "GPUTOP_AGENT_PATH="+in.AgentDir)
	}
	return out
}

// Events is what the command's Python processes reported through the
// sitecustomize.
type Events struct {
	Pythons int // processes that ran the sitecustomize
	Torch   int // of them, those that imported torch
	CUDA    int // those that used CUDA and attached the agent
	// those that imported JAX or CuPy (the agent attaches at the import
	// and reads the framework once it has a GPU)
	Frameworks int
	NoAgent    []string // why an agent did not attach, once per distinct reason
	Caps       []Cap    // the memory caps set (GPUTOP_MEMORY_CAP), at most MaxCaps
	Problems   []string // lines that could not be read
}

// Cap is what one process said of the memory cap GPUTOP_MEMORY_CAP asked
// for (the agent's _cap): set on a device, with the device's free and
// total bytes then, or why not.
type Cap struct {
	PID              int
	Dev              int
	Cap, Free, Total uint64
	Error            string // why it was not set; the figures are then 0
}

// MaxCaps bounds the caps read from the events file: one per process.
const MaxCaps = 64

// parseCap reads a cap line's detail: "dev=D cap=C free=F total=T" or
// "dev=D error=WHY" (the rest of the line).
func parseCap(pid int, detail string) Cap {
	c := Cap{PID: pid}
	for detail != "" {
		var kv string
		kv, detail, _ = strings.Cut(detail, " ")
		k, v, _ := strings.Cut(kv, "=")
		if k == "error" {
			c.Error = strings.TrimSpace(v + " " + detail)
			break
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "dev":
			c.Dev = int(n)
		case "cap":
			c.Cap = n
		case "free":
			c.Free = n
		case "total":
			c.Total = n
		}
	}
	if c.Error == "" && c.Cap == 0 {
		c.Error = "the agent said nothing of the cap it set"
	}
	return c
}

// Events reads the events file (missing: no Python process ran).
func (in *Injection) Events() Events {
	var ev Events
	f, err := os.Open(filepath.Join(in.Dir, "events"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			ev.Problems = append(ev.Problems, err.Error())
		}
		return ev
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pidText, rest, _ := strings.Cut(sc.Text(), " ")
		kind, detail, _ := strings.Cut(rest, " ")
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			continue
		}
		switch kind {
		case "python":
			ev.Pythons++
		case "torch":
			ev.Torch++
		case "cuda":
			ev.CUDA++
		case "jax", "cupy":
			ev.Frameworks++
		case "cap":
			if len(ev.Caps) < MaxCaps {
				ev.Caps = append(ev.Caps, parseCap(pid, detail))
			}
		case "noagent":
			if !seen[detail] {
				seen[detail] = true
				ev.NoAgent = append(ev.NoAgent, detail)
			}
		}
	}
	return ev
}

// FindAgent returns the directory holding the agent package `gputop` (a
// directory D with D/gputop/_autorun.py) for a binary at exe:
// $GPUTOP_AGENT_PATH when set; else, from the binary's own directory
// upwards (symlinks resolved, four levels), each level's gputop/ (the
// binary inside the installed package), agent/ (a checkout: ./gputop
// beside agent/gputop) and lib/python3*/site-packages (bin/gputop of a
// prefix or venv the agent is installed in). "" when none is found: the
// command's Python then imports `gputop` as it would by itself.
func FindAgent(exe string) string {
	if d := os.Getenv("GPUTOP_AGENT_PATH"); d != "" {
		return d
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	has := func(d string) bool {
		st, err := os.Stat(filepath.Join(d, "gputop", "_autorun.py"))
		return err == nil && st.Mode().IsRegular()
	}
	dir := filepath.Dir(exe)
	for range 4 {
		if has(dir) {
			return dir
		}
		if d := filepath.Join(dir, "agent"); has(d) {
			return d
		}
		sites, _ := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages"))
		for _, d := range sites {
			if has(d) {
				return d
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	return ""
}
