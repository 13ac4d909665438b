// Command gputop is a terminal GPU-memory profiler for PyTorch: NVML sampled
// at 1 kHz from outside, the caching allocator's own counters streamed from
// inside the training process, labelled snapshots, CSV, record and replay.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/gputop/gputop/outfile"
	"github.com/gputop/gputop/printable"
)

const version = "0.1.0"

// toolVersion names this gputop in a recording's header; gputop --ssh
// compares a remote's with its own.
func toolVersion() string { return "gputop " + version }

const usage = `gputop: GPU memory profiler for PyTorch (NVML + in-process allocator agent)

Usage:
  gputop [flags]                  live TUI over local GPUs (NVML) and attached agents
  gputop --demo                   TUI over a real H200 recording embedded in the binary
  gputop --ssh HOST[,HOST...]     TUI over remote hosts (each runs gputop serve --stdio over ssh;
                                  $GPUTOP_SSH: the ssh command and its options)
  gputop --replay FILE            TUI over a recording
  gputop --record FILE [flags]    live TUI that also writes a recording, with the rows you rename or delete
  gputop record -o FILE [flags]   headless recording until Ctrl-C or --duration;
                                  an existing FILE with data only with --force
  gputop export FILE --csv OUT    summary CSV of a recording (OUT - is standard output)
  gputop serve [--stdio|-o FILE]  NVML and agents with no terminal until SIGINT/SIGTERM (a cluster
                                  node: --metrics ADDR); --stdio: the live stream on standard output,
                                  until standard input ends (for --ssh); -o FILE: a recording too
  gputop snap LABEL [--end]       add a labelled snapshot to the running gputop (--end: an end row)
  gputop status [--json]          devices, processes, agents, the newest rows and OOMs, once: from the
                                  running gputop, else one NVML reading (--json: docs/status.md)
  gputop dump-info FILE           a torch memory dump (memory_viz's pickle) as text
  gputop run [flags] -- CMD ARGS  run CMD with the agent attached at its first CUDA use, no code
                                  change; its output in a pane (--no-tui, or not a terminal:
                                  passed through, the summary at the end; exits with CMD's code)
  gputop fit --values V1,V2,... [--memory SIZE] -- CMD ARGS
                                  run CMD once per value ({} in it replaced), the agent attached and
                                  the memory capped; from each run's peak, the largest value that fits
  gputop help [COMMAND]           this text, or a command's usage and flags
  gputop version
`

func main() {
	// GPUTOP_CPUPROFILE=FILE writes a CPU profile of the whole run and
	// GPUTOP_MEMPROFILE=FILE a heap profile (allocations over the run) at
	// its end, for bench/; %p in FILE becomes the process id.
	profile := func(env string) *os.File {
		path := os.Getenv(env)
		if path == "" {
			return nil
		}
		f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
		if err != nil {
			fmt.Fprintf(os.Stderr, "gputop: %s: %v\n", env, err)
			return nil
		}
		return f
	}
	cpu, mem := profile("GPUTOP_CPUPROFILE"), profile("GPUTOP_MEMPROFILE")
	if cpu != nil && pprof.StartCPUProfile(cpu) != nil {
		cpu.Close()
		cpu = nil
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	if cpu != nil {
		pprof.StopCPUProfile()
		cpu.Close()
	}
	if mem != nil {
		pprof.Lookup("allocs").WriteTo(mem, 0)
		mem.Close()
	}
	os.Exit(code)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return cmdRun(args[1:], stderr)
		case "fit":
			return cmdFit(args[1:], stdout, stderr)
		case "record":
			return cmdRecord(args[1:], stderr)
		case "serve":
			return cmdServe(args[1:], os.Stdin, os.Stdout, stderr)
		case "export":
			return cmdExport(args[1:], stdout, stderr)
		case "snap":
			return cmdSnap(args[1:], stdout, stderr)
		case "status":
			return cmdStatus(args[1:], stdout, stderr)
		case "dump-info":
			return cmdDumpInfo(args[1:], stdout, stderr)
		case "help":
			return cmdHelp(args[1:], stdout, stderr)
		case "version", "--version", "-version":
			if len(args) > 1 && helpFlag(args[1]) {
				return cmdHelp(args[:1], stdout, stderr)
			}
			fmt.Fprintln(stdout, "gputop", version)
			return 0
		}
	}
	return cmdTUI(args, stderr)
}

func newFlagSet(name string, stderr io.Writer, extra string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if name == "gputop" {
			fmt.Fprint(stderr, usage)
		} else {
			fmt.Fprintf(stderr, "Usage:\n%s", commandUsage(name))
		}
		if extra != "" {
			fmt.Fprint(stderr, extra)
		}
		// the flag package names a flag's argument after the back-quoted
		// word in its usage text (else after its type): each usage says
		// its argument that way, as the lines above write it
		fmt.Fprint(stderr, "\nFlags:\n")
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		// written --name as the usage lines and the README write them (the
		// flag package takes both); a one-letter flag stays -o
		fmt.Fprint(stderr, longFlag.ReplaceAllString(b.String(), "  --$1"))
		if name != "gputop" {
			fmt.Fprint(stderr, "\nEvery command: gputop help\n")
		}
	}
	return fs
}

var longFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z.-]+)`)

// commandUsage is usage's entry for the command name ("gputop record"):
// its lines and their continuations.
func commandUsage(name string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(l, "  "+name+" ") || l == "  "+name:
			in = true
		case !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// cmdHelp is gputop help [COMMAND]: the usage, or a command's own (its
// --help), on standard output.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage)
		return 0
	case helpFlag(args[0]):
		args = []string{"help"} // gputop help --help: help's own usage
	case len(args) > 1:
		say(stderr, fmt.Sprintf("gputop help: unexpected argument %q (gputop help [COMMAND])", args[1]))
		return 2
	}
	switch args[0] {
	case "run", "fit", "record", "serve", "export", "snap", "status", "dump-info":
		return run([]string{args[0], "--help"}, stdout, stdout)
	case "help", "version":
		fmt.Fprintf(stdout, "Usage:\n%s", commandUsage("gputop "+args[0]))
		return 0
	}
	say(stderr, fmt.Sprintf("gputop help: no command %q; the commands: run, fit, record, serve, export, snap, status, dump-info, version", args[0]))
	return 2
}

// helpFlag reports whether arg asks for help as the flag package's -h does.
func helpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

// parse returns -1 to continue, or an exit code (0 for -h, 2 for bad flags).
func parse(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	return -1
}

// usageError is a command line wrong as a whole: said, then the usage.
type usageError string

func (e usageError) Error() string { return string(e) }

// commandFlags are a subcommand's flags: registered on its flag set, and
// checked together once parsed (its arguments, flags that go together).
type commandFlags interface {
	register(fs *flag.FlagSet)
	check(fs *flag.FlagSet) error
}

// parseCommand parses args into the flags f of the command name (its usage
// the common one, then extra) and checks them. It returns the flag set and
// -1 to continue, or the exit code: 0 for -h, 2 for a bad flag or what
// check finds wrong, said after the command's name (and the usage after a
// usageError).
func parseCommand(name, extra string, f commandFlags, args []string, stderr io.Writer) (*flag.FlagSet, int) {
	fs := newFlagSet(name, stderr, extra)
	f.register(fs)
	if code := parse(fs, args); code >= 0 {
		return fs, code
	}
	err := f.check(fs)
	if err == nil {
		return fs, -1
	}
	say(stderr, name+":", err)
	var ue usageError
	if errors.As(err, &ue) {
		fs.Usage()
	}
	return fs, 2
}

// noArguments is the check of a command that takes no arguments.
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	return nil
}

// given reports whether the flag name was on the command line (a default
// can mean "none" where the same value given would be a mistake).
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// say prints a message as fmt.Fprintln does, each of its lines made
// printable: messages quote file names, socket paths and what recordings
// and peers said.
func say(w io.Writer, a ...any) {
	lines := strings.Split(strings.TrimSuffix(fmt.Sprintln(a...), "\n"), "\n")
	for i, l := range lines {
		lines[i] = printable.Clean(l)
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// refusedLink reports whether err is a symlink that outfile will not
// follow (another user's, in a sticky directory): an output path that
// stays refused however long the session, so it is refused at the start.
func refusedLink(err error) bool {
	var le *outfile.LinkError
	return errors.As(err, &le)
}
