// What gputop asks of its peers (holders walks) and answers them (snap,
// status).

package agentlink

import (
	"fmt"

	"github.com/gputop/gputop/wire"
)

// RequestHolders asks the agent of pid which references hold its CUDA
// memory. It does not wait: the answer arrives later as st.AgentHolders.
func (s *Server) RequestHolders(pid int) error { return s.request(pid, wire.RequestHolders, nil) }

// RequestDump asks the agent of pid for a memory dump (torch's memory
// snapshot with its allocation history). It does not wait: the answer
// is a row labelled wire.LabelDump that names the file, or says why
// there is none.
func (s *Server) RequestDump(pid int) error { return s.request(pid, wire.RequestDump, nil) }

// RequestHeld asks the agent of pid for a holders walk whose attribution
// is of torch device dev: the answer to an end row (an ingest.Asker).
func (s *Server) RequestHeld(pid, dev int) error { return s.request(pid, wire.RequestHolders, &dev) }

func (s *Server) request(pid int, what string, dev *int) error {
	s.mu.Lock()
	c := s.agents[pid]
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("no agent with pid %d is attached", pid)
	}
	b, err := encodeLine(wire.Request{Type: wire.TypeRequest, What: what, ID: id, Dev: dev})
	if err != nil {
		return err
	}
	select {
	case <-c.done:
		return fmt.Errorf("pid %d has disconnected", pid)
	default:
	}
	select {
	case c.out <- b:
		return nil
	default:
		return fmt.Errorf("pid %d is not reading requests (%d waiting)", pid, cap(c.out))
	}
}

// snap takes a snapshot of every known device for `gputop snap LABEL`.
func (s *Server) snap(c *client, f wire.Snap) {
	label := wire.Clip(f.Label, wire.MaxLabelBytes) // the log line is drawn at every frame
	devs := s.st.Devices()
	if len(devs) == 0 {
		s.reply(c, wire.Reply{Type: wire.TypeReply, Error: "no devices known yet"})
		s.log(fmt.Sprintf("snapshot %q from the shell refused: no devices known yet", label))
		s.finish(c, false, 0, "", "")
		return
	}
	t := s.now().UnixNano()
	for _, d := range devs {
		s.in.TakeSnapshot(f.Label, d.Index, t, "cli", f.End)
	}
	s.reply(c, wire.Reply{Type: wire.TypeReply, OK: true})
	s.log(fmt.Sprintf("snapshot %q from the shell on %d device(s)", label, len(devs)))
	s.finish(c, false, 0, "", "")
}

// status answers `gputop status` with the status report, at most
// wire.MaxStatusBytes (the report's own bounds keep it far below; a
// report past it is refused, not cut, so that no figure is silently lost).
// One report is made and sent at a time (its write bounded by
// writeTimeout); the others wait their turn.
func (s *Server) status(c *client) {
	if s.statusOf == nil {
		s.reply(c, wire.Reply{Type: wire.TypeReply, Error: "this gputop makes no status report"})
		s.finish(c, false, 0, "", "")
		return
	}
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	rep := s.statusOf()
	rep.Socket = s.path
	b, err := encodeLine(wire.Reply{Type: wire.TypeReply, OK: true, Status: &rep})
	switch {
	case err != nil:
		s.reply(c, wire.Reply{Type: wire.TypeReply, Error: "status report: " + err.Error()})
	case len(b)-1 > wire.MaxStatusBytes:
		msg := fmt.Sprintf("the status report is %d bytes, over the %d-byte limit", len(b)-1, wire.MaxStatusBytes)
		s.reply(c, wire.Reply{Type: wire.TypeReply, Error: msg})
		s.log("gputop status refused: " + msg)
	default:
		c.write(b, s.writeTimeout) // the peer may be gone; nothing to do then
	}
	s.finish(c, false, 0, "", "")
}

func (s *Server) reply(c *client, r wire.Reply) {
	if b, err := encodeLine(r); err == nil {
		c.write(b, s.writeTimeout) // the peer may be gone; nothing to do then
	}
}
