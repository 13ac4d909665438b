// The clients of a running gputop: `gputop snap` and `gputop status`.

package agentlink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gputop/gputop/wire"
)

// ErrNotRunning is what Snap and Status return (wrapped, naming the path)
// when no gputop listens on the socket.
var ErrNotRunning = errors.New("no gputop is running")

// Snap asks the gputop listening at path to take a labelled snapshot of
// every device it knows (`gputop snap LABEL`); end, when set, says whether
// its rows end a run (else the label decides). It waits at most timeout for
// the answer and returns gputop's reason when it refuses.
func Snap(path, label string, end *bool, timeout time.Duration) error {
	if strings.TrimSpace(label) == "" {
		return errors.New("snapshot label is empty")
	}
	b, err := encodeLine(wire.Snap{Type: wire.TypeSnap, V: wire.Version, Label: label, End: end})
	if err != nil {
		return err
	}
	if len(b) > wire.MaxFrameBytes {
		return fmt.Errorf("snapshot label is too long (%d bytes)", len(label))
	}
	r, err := ask(path, b, wire.MaxFrameBytes, timeout)
	if err != nil {
		return err
	}
	if !r.OK {
		return fmt.Errorf("gputop refused the snapshot: %s", r.Error)
	}
	return nil
}

// Status asks the gputop listening at path for its status report
// (`gputop status`), reading at most wire.MaxStatusBytes of answer and
// waiting at most timeout. Its error wraps ErrNotRunning when nothing
// listens there.
func Status(path string, timeout time.Duration) (wire.StatusReport, error) {
	b, err := encodeLine(wire.Status{Type: wire.TypeStatus, V: wire.Version})
	if err != nil {
		return wire.StatusReport{}, err
	}
	r, err := ask(path, b, wire.MaxStatusBytes, timeout)
	if err != nil {
		return wire.StatusReport{}, err
	}
	switch {
	case !r.OK:
		return wire.StatusReport{}, fmt.Errorf("gputop at %s refused the status request: %s", path, r.Error)
	case r.Status == nil:
		return wire.StatusReport{}, fmt.Errorf("gputop at %s answered without a status report", path)
	case r.Status.Version != wire.StatusVersion:
		return wire.StatusReport{}, fmt.Errorf("gputop at %s sent a status report of version %d; this gputop reads version %d",
			path, r.Status.Version, wire.StatusVersion)
	}
	return *r.Status, nil
}

// ask sends one frame (line, newline included) to the gputop at path and
// reads its reply, a line of at most limit bytes, within timeout.
func ask(path string, line []byte, limit int, timeout time.Duration) (wire.Reply, error) {
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	deadline := time.Now().Add(timeout)
	nc, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return wire.Reply{}, fmt.Errorf("%w: nothing listens on %s (start gputop, or set %s to its socket)", ErrNotRunning, path, SocketEnv)
		}
		return wire.Reply{}, fmt.Errorf("cannot reach gputop at %s: %w", path, err)
	}
	defer nc.Close()
	nc.SetDeadline(deadline)
	if _, err := nc.Write(line); err != nil {
		return wire.Reply{}, fmt.Errorf("sending to gputop at %s: %w", path, err)
	}
	answer, err := newLineReader(nc, limit).next()
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return wire.Reply{}, fmt.Errorf("gputop at %s did not answer within %v", path, timeout)
		case errors.Is(err, errTooLong):
			return wire.Reply{}, fmt.Errorf("gputop at %s answered with a line longer than %d bytes", path, limit)
		}
		return wire.Reply{}, fmt.Errorf("reading gputop's answer from %s: %w", path, err)
	}
	f, err := decodeFrame(answer)
	if err != nil {
		return wire.Reply{}, fmt.Errorf("gputop's answer: %w", err)
	}
	r, ok := f.(wire.Reply)
	if !ok {
		return wire.Reply{}, fmt.Errorf("gputop answered with a %q frame instead of a reply", frameType(f))
	}
	return r, nil
}
