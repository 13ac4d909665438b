package recording

import "github.com/gputop/gputop/wire"

// MaxLineBytes is the longest line of a recording, newline not counted: the
// Writer drops a longer frame (Stats.DroppedTooLong, a dropped line's
// too_long) and Load refuses one.
//
// It is four times an agent's line (wire.MaxFrameBytes) so that whatever
// gputop admitted live can be written and loaded again. Recording a frame
// can make it longer than the agent sent it: gputop adds the pid, a mark
// becomes rows carrying its label, a hello its devices, and text
// from outside is cleaned (a character becomes at most three bytes, U+FFFD).
// The socket server admits a frame only if its canonical encoding (Go's
// field order, no HTML escaping: what the Writer writes) fits in
// wire.MaxFrameBytes, so its recorded lines stay under three times that
// plus a few hundred bytes.
const MaxLineBytes = 4 << 20

// the bound above, checked by the compiler: negative constants do not
// convert to uint
const _ = uint(MaxLineBytes - 3*wire.MaxFrameBytes - 64<<10)
