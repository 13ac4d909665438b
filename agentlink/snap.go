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

// Snap asks the gputop listening at path to take a labelled snapshot of
// every device it knows (`gputop snap LABEL`); end, when set, says whether
// its rows end a run (else the label decides). It waits at most timeout for
// the answer and returns gputop's reason when it refuses.
func Snap(path, label string, end *bool, timeout time.Duration) error {
	if strings.TrimSpace(label) == "" {
		return errors.New("snapshot label is empty")
	}
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	deadline := time.Now().Add(timeout)
	nc, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("no gputop is running: nothing listens on %s (start gputop, or set %s to its socket)", path, SocketEnv)
		}
		return fmt.Errorf("cannot reach gputop at %s: %w", path, err)
	}
	defer nc.Close()
	nc.SetDeadline(deadline)
	b, err := encodeLine(wire.Snap{Type: wire.TypeSnap, V: wire.Version, Label: label, End: end})
	if err != nil {
		return err
	}
	if len(b) > wire.MaxFrameBytes {
		return fmt.Errorf("snapshot label is too long (%d bytes)", len(label))
	}
	if _, err := nc.Write(b); err != nil {
		return fmt.Errorf("sending to gputop at %s: %w", path, err)
	}
	line, err := newLineReader(nc, wire.MaxFrameBytes).next()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("gputop at %s did not answer within %v", path, timeout)
		}
		return fmt.Errorf("reading gputop's answer from %s: %w", path, err)
	}
	f, err := decodeFrame(line)
	if err != nil {
		return fmt.Errorf("gputop's answer: %w", err)
	}
	r, ok := f.(wire.Reply)
	if !ok {
		return fmt.Errorf("gputop answered with a %q frame instead of a reply", frameType(f))
	}
	if !r.OK {
		return fmt.Errorf("gputop refused the snapshot: %s", r.Error)
	}
	return nil
}
