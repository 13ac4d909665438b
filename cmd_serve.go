// gputop serve: sampling and agents with no terminal, for a node of a
// cluster: Prometheus scrapes --metrics, and -o FILE records as well.

package main

import (
	"fmt"
	"io"
)

const serveUsage = `
gputop serve [--metrics ADDR] [-o FILE] [flags]
  samples NVML and serves the agent socket with no terminal until SIGINT or
  SIGTERM; events go to stderr; -o FILE also writes a recording
`

func cmdServe(args []string, stderr io.Writer) int {
	fs := newFlagSet("gputop serve", stderr, serveUsage)
	h := headless{name: "gputop serve"}
	h.sources.register(fs)
	fs.StringVar(&h.out, "o", "", "also write a recording to `FILE` (default: none)")
	h.register(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop serve: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	return h.run(stderr)
}
