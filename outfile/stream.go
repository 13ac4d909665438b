package outfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// HoldsDataError is an existing regular file with data in it that a stream
// would truncate without being told to.
type HoldsDataError struct{ Size int64 }

func (e *HoldsDataError) Error() string {
	return fmt.Sprintf("it already holds %d bytes and is left as it is", e.Size)
}

// CheckStream looks at path for a stream written from its start (a
// recording) without touching it. Besides what Resolve refuses, it refuses
// an existing regular file that holds data, unless replace, with a
// *HoldsDataError.
func CheckStream(path string, replace bool) (Target, error) {
	t, err := Resolve(path)
	if err != nil {
		return t, err
	}
	if t.Kind == Regular && t.Info.Size() > 0 && !replace {
		return t, t.fail(&HoldsDataError{Size: t.Info.Size()})
	}
	return t, nil
}

// fifoPoll is how often OpenStream tries a FIFO that has no reader yet.
const fifoPoll = 50 * time.Millisecond

// OpenStream opens path to be written from its start. It looks at the path
// again, as CheckStream does (it may have changed since), then: creates a
// new file (0666 less the umask; never over one that appeared meanwhile),
// truncates an existing regular file (only an empty one unless replace),
// opens a character device or FIFO where it is, or returns the descriptor.
// A FIFO without a reader is waited for, as a shell would, until ctx is
// done; waiting is called once when that starts. Errors are *Error.
func OpenStream(ctx context.Context, path string, replace bool, waiting func()) (*os.File, error) {
	t, err := CheckStream(path, replace)
	if err != nil {
		return nil, err
	}
	var f *os.File
	switch t.Kind {
	case Descriptor:
		f, err = t.file()
	case New:
		f, err = os.OpenFile(t.Name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			err = errors.New("a file appeared there while gputop was starting; it is left as it is")
		}
	case Regular:
		f, err = os.OpenFile(t.Name, os.O_WRONLY, 0)
		if err == nil {
			err = truncate(f, t, replace)
		}
	default:
		for said := false; ; said = true {
			f, err = t.openInPlace()
			if !errors.Is(err, ErrNoReader) {
				break
			}
			if !said && waiting != nil {
				waiting()
			}
			select {
			case <-ctx.Done():
				return nil, t.fail(fmt.Errorf("%w (stopped waiting: %v)", ErrNoReader, context.Cause(ctx)))
			case <-time.After(fifoPoll):
			}
		}
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, t.fail(err)
	}
	return f, nil
}

// truncate empties the regular file f opened for t, once sure it is still
// the file that was checked and may be emptied.
func truncate(f *os.File, t Target, replace bool) error {
	if err := sameFile(f, t.Info); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > 0 && !replace {
		return &HoldsDataError{Size: fi.Size()}
	}
	return f.Truncate(0)
}
