package agentlink

import (
	"bytes"
	"fmt"

	"github.com/gputop/gputop/wire"
)

type sessionState uint8

const (
	stateNew   sessionState = iota // nothing received yet
	stateAgent                     // hello received
	stateDone                      // bye, snap or status received; nothing may follow
)

// session checks the order of frames on one connection: a hello, a snap or
// a status first, agent frames after a hello, nothing after a bye, a snap
// or a status. It knows
// nothing of sockets, so the test vectors can be run through it directly.
type session struct {
	line  int // lines seen so far, counting from 1
	state sessionState
	pid   int // from the hello
}

// next decodes one line (without its newline). It returns nil, nil for a
// blank line. Errors begin with "line N: ".
func (s *session) next(line []byte) (any, error) {
	s.line++
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	f, err := decodeFrame(line)
	if err == nil {
		err = s.admit(f)
	}
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", s.line, err)
	}
	return f, nil
}

// tooLong is the error for the line being read when it passed the limit.
func (s *session) tooLong() error {
	return fmt.Errorf("line %d: longer than %d bytes", s.line+1, wire.MaxFrameBytes)
}

func (s *session) admit(f any) error {
	typ := frameType(f)
	switch s.state {
	case stateDone:
		return fmt.Errorf("%q after the end of the connection", typ)
	}
	if spec, ok := wire.Lookup(typ); ok && spec.Socket == wire.ToPeer {
		return fmt.Errorf("frame type %q is sent by gputop, not to it", typ)
	}
	switch s.state {
	case stateNew:
		switch f := f.(type) {
		case wire.Hello:
			s.state, s.pid = stateAgent, f.PID
			return nil
		case wire.Snap, wire.Status:
			s.state = stateDone
			return nil
		}
		return fmt.Errorf("first frame must be %q, %q or %q, got %q", wire.TypeHello, wire.TypeSnap, wire.TypeStatus, typ)
	}
	switch f := f.(type) {
	case wire.Hello:
		// A repeated hello updates the device list (a process that
		// initialises another device later); it cannot change who is talking.
		if f.PID != s.pid {
			return fmt.Errorf("hello: pid changed from %d to %d on the same connection", s.pid, f.PID)
		}
	case wire.Snap, wire.Status:
		return fmt.Errorf("%q must be the first and only frame of its connection", typ)
	case wire.Bye:
		s.state = stateDone
	}
	return nil
}

// frameType names a decoded frame, for reasons given to the peer.
func frameType(f any) string {
	if fr, ok := f.(wire.Frame); ok {
		return fr.FrameType()
	}
	return fmt.Sprintf("%T", f)
}
