// gputop snap LABEL: a labelled snapshot in the running gputop.

package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gputop/gputop/agentlink"
)

func cmdSnap(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop snap", stderr, "")
	sock := fs.String("socket", "", "`PATH` of the running gputop's socket")
	endFlag := fs.Bool("end", false, "the rows end a run and get a verdict (--end=false: they do not); without it the label decides (\"After cleanup\", \"Training end\" do)")
	var label string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		label, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if label == "" && fs.NArg() == 1 {
		label = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop snap: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if label == "" {
		fmt.Fprintln(stderr, "gputop snap: want a LABEL")
		return 2
	}
	path := *sock
	if path == "" {
		p, err := agentlink.DefaultSocketPath()
		if err != nil {
			say(stderr, "gputop snap:", err)
			return 1
		}
		path = p
	}
	var end *bool
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "end" {
			end = endFlag
		}
	})
	if err := agentlink.Snap(path, label, end, 3*time.Second); err != nil {
		say(stderr, "gputop snap:", err)
		return 1
	}
	fmt.Fprintf(stdout, "snapshot %q added\n", label)
	return 0
}
