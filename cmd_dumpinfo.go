// gputop dump-info FILE: a torch memory dump summed up as text.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/gputop/gputop/memdump"
	"github.com/gputop/gputop/wire"
)

func cmdDumpInfo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gputop dump-info", stderr, "")
	top := fs.Int("top", 20, "`N` frames shown per device (0: all)")
	var file string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		file, args = args[0], args[1:]
	}
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		say(stderr, fmt.Sprintf("gputop dump-info: unexpected argument %q", fs.Arg(0)))
		return 2
	}
	if file == "" {
		fmt.Fprintln(stderr, "gputop dump-info: want a FILE (a torch memory dump: memory_viz's pickle)")
		return 2
	}
	if *top < 0 {
		fmt.Fprintf(stderr, "gputop dump-info: --top %d: want a number of frames, 0 for all\n", *top)
		return 2
	}
	d, err := memdump.ReadFile(context.Background(), file)
	if err != nil {
		if isRecording(file) {
			say(stderr, fmt.Sprintf("gputop dump-info: %s is a gputop recording, not a torch memory dump: "+
				"gputop --replay %s shows it, gputop export %s --csv OUT writes its summary", file, file, file))
			return 1
		}
		say(stderr, "gputop dump-info:", err)
		return 1
	}
	if err := memdump.WriteText(stdout, d, *top); err != nil {
		say(stderr, "gputop dump-info:", err)
		return 1
	}
	return 0
}

// isRecording reports whether path starts as a gputop recording does (its
// header line), the file most often given to dump-info by mistake.
func isRecording(path string) bool {
	// O_NONBLOCK and regular files only: a FIFO must not block here either
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	head := make([]byte, 64)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte(`{"type":"`+wire.TypeRecording+`"`))
}
