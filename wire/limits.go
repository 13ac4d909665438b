package wire

import "time"

// MaxClockSkew bounds how far the time of a frame from a peer may be from
// gputop's clock. Agents run on the same machine and stamp frames with the
// same clock, so a time further off is a broken or hostile peer. A
// recording holds times up to this much before its header's start, so
// whatever gputop admitted live loads again.
const MaxClockSkew = 24 * time.Hour
