// gputop dump-info FILE: a torch memory dump summed up as text.

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gputop/gputop/memdump"
)

func cmdDumpInfo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop dump-info", stderr, "\ngputop dump-info FILE [--top N]\n")
	top := fs.Int("top", 20, "`N` frames shown per device (0: all)")
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		say(stderr, fmt.Sprintf("gputop dump-info: unexpected argument %q", fs.Arg(0)))
		return 2
	}
	if file == "" {
		fmt.Fprintln(stderr, "gputop dump-info: want a FILE (a torch memory dump: memory_viz's pickle)")
		return 2
	}
	if *top < 0 {
		fmt.Fprintf(stderr, "gputop dump-info: --top %d: want a number of frames, 0 for all\n", *top)
		return 2
	}
	d, err := memdump.ReadFile(context.Background(), file)
	if err != nil {
		say(stderr, "gputop dump-info:", err)
		return 1
	}
	if err := memdump.WriteText(stdout, d, *top); err != nil {
		say(stderr, "gputop dump-info:", err)
		return 1
	}
	return 0
}
