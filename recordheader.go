package main

import (
	"os"
	"time"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/wire"
)

// newRecordingWriter is the writer of every recording gputop makes (record,
// serve, run, the TUI's --record), its header saying this host, now, this
// version plus what wrote it (tool, e.g. " (TUI)"), the sampling rate, and
// the remote hosts shown with --ssh.
func newRecordingWriter(rate float64, tool, comment string, hosts []string) *recording.Writer {
	host, _ := os.Hostname()
	return recording.NewWriter(wire.Recording{
		Type: wire.TypeRecording, V: wire.Version, Start: time.Now().UnixNano(), Host: host,
		Tool: toolVersion() + tool, RateHz: int(rate), Comment: comment, Hosts: hosts,
	})
}
