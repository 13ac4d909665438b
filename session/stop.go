// The end of a session, in one order.

package session

import "github.com/gputop/gputop/recording"

// Ended is what a session's recording came to.
type Ended struct {
	// Path names the output ("standard output" for Record.Out); "": the
	// session had no recording.
	Path string
	// Err is the recording's first error: a write that failed, or
	// recording.ErrStalled when the output did not take the rest within
	// recording.CloseWait.
	Err error
	// Drops says what the recording lost, as Writer.DropSummary does ("":
	// nothing); the file says so too, and loads.
	Drops string
	Stats recording.Stats
}

// Stop ends the session in this order: the sources (nothing more comes
// in: NVML's thread, the agent socket and its file, the remote hosts'
// ssh), then the alerts (a last look at the store, the commands still
// running given alert.StopWait), then the recording (what is queued flushed, waiting at most
// recording.CloseWait for a stalled output), then the metrics endpoint,
// which answers scrapes until then. It returns what the recording came to;
// later calls return the same.
func (s *Session) Stop() Ended {
	s.stopOnce.Do(func() {
		s.stopSources()
		s.sources.Wait()
		if s.alerts != nil {
			s.alerts.Stop() // what came last, its commands given alert.StopWait
		}
		if s.rec != nil {
			err := s.rec.Close()
			s.ended = Ended{Path: s.rec.Path(), Err: err, Drops: s.rec.DropSummary(), Stats: s.rec.Stats()}
		}
		if s.stopMetrics != nil {
			s.stopMetrics()
			<-s.metricsDone
		}
	})
	return s.ended
}
