// gputop status [--json]: what the running gputop knows, or one NVML
// reading when none runs, printed once.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputop/gputop/agentlink"
	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/status"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// Exit codes of gputop status (docs/status.md).
const (
	statusOK       = 0
	statusNoSource = 1 // no gputop is running and NVML cannot be read, or the running gputop did not answer
	statusUsage    = 2
)

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop status", stderr, "\nExit status: 0 printed; 1 no gputop is running and NVML cannot be read, or the running gputop failed to answer; 2 a usage error.\nThe JSON's fields: docs/status.md.\n")
	asJSON := fs.Bool("json", false, "print the report as JSON (docs/status.schema.json) instead of tables")
	sock := fs.String("socket", "", "`PATH` of the running gputop's socket")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gputop status: unexpected argument %q\n", fs.Arg(0))
		return statusUsage
	}
	rep, code := statusReport(*sock, nvml.New(), stderr)
	if code != statusOK {
		return code
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			say(stderr, "gputop status:", err)
			return statusNoSource
		}
		return statusOK
	}
	if err := status.Text(stdout, rep); err != nil {
		say(stderr, "gputop status:", err)
		return statusNoSource
	}
	return statusOK
}

// statusReport asks the gputop listening at sock (the default path when
// "") for its report; when none listens there, it makes one from one
// NVML reading through lib.
func statusReport(sock string, lib nvml.Interface, stderr io.Writer) (wire.StatusReport, int) {
	path := sock
	if path == "" {
		p, err := agentlink.DefaultSocketPath()
		if err != nil {
			say(stderr, "gputop status:", err)
			return wire.StatusReport{}, statusNoSource
		}
		path = p
	}
	rep, err := agentlink.Status(path, 5*time.Second)
	if err == nil {
		status.Clean(&rep) // text from outside
		return rep, statusOK
	}
	if !errors.Is(err, agentlink.ErrNotRunning) {
		say(stderr, "gputop status:", err)
		return wire.StatusReport{}, statusNoSource
	}
	rep, nerr := nvmlReport(lib)
	if nerr != nil {
		say(stderr, "gputop status: nothing to report:", fmt.Sprintf("%v; and NVML cannot be read: %v", err, nerr))
		return wire.StatusReport{}, statusNoSource
	}
	return rep, statusOK
}

// nvmlReport is the report of one NVML reading: devices and processes.
func nvmlReport(lib nvml.Interface) (wire.StatusReport, error) {
	st := store.New(store.DefaultOptions())
	n := sampler.NewNVML(lib, ingest.New(st), sampler.NVMLOptions{})
	if err := n.Init(); err != nil {
		return wire.StatusReport{}, err
	}
	defer n.Close()
	n.ReadOnce()
	return status.Of(st, status.Options{Source: wire.StatusFromNVML}), nil
}
