package memdump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What FuzzRead holds every input to: no panic; decoding allocates no more
// than the guard estimated, plus fuzzDecodeSlack (the bufio buffer, the
// memo gopickle makes for 384, the first stacks); the whole read (decoding
// and the summary) no more than fuzzAllocPerByte bytes a byte of the
// input plus fuzzAllocBase; and it takes no more CPU than fuzzCPUBase plus
// fuzzCPUPerByte a byte (the process's CPU time, GC included: run with
// -parallel 1, a worker runs one input at a time).
const (
	fuzzDecodeSlack  = 2 << 20
	fuzzAllocPerByte = MemoryPerByte + 32
	fuzzAllocBase    = MemoryBase + 4<<20
	fuzzCPUBase      = time.Second
	fuzzCPUPerByte   = 10 * time.Microsecond
)

func FuzzRead(f *testing.F) {
	for _, glob := range []string{filepath.Join(dir, "*.pickle"), filepath.Join(hostile, "*.pickle")} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	oom, err := os.ReadFile(filepath.Join(dir, "oom.pickle"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(oom[:len(oom)/2]) // cut short
	f.Add(dumpPickle("train.py"))
	f.Add(nested(4 << 10))
	f.Add([]byte("\x80\x04" + strings.Repeat("(", 4<<10) + "."))
	f.Add([]byte("\x80\x04" + strings.Repeat("]\x94", 2<<10) + "."))
	f.Add([]byte("\x80\x04](" + strings.Repeat("}", 4<<10) + "e."))
	f.Add([]byte("\x80\x04\x8b" + le(4, 1000) + strings.Repeat("\x01", 1000) + "."))
	f.Add([]byte("cos\nsystem\n(S'ls'\ntR."))
	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		ctx := context.Background()
		var c cost
		var v any
		var d *Dump
		var decErr, sumErr error
		cpu0 := cpuTime()
		start := time.Now()
		decoded := allocated(func() { v, decErr = decode(ctx, bytes.NewReader(data), "fuzz.pickle", size, &c) })
		summed := uint64(0)
		if decErr == nil {
			summed = allocated(func() { d, sumErr = summariseSafely(ctx, v, size, &c) })
		}
		cpu, wall := cpuTime()-cpu0, time.Since(start)
		err := firstErr(decErr, sumErr)

		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("a panic summing it up: %v", err)
		}
		var re *ReadError
		var be *BudgetError
		switch {
		case errors.As(err, &re):
			if re.Offset < 0 || re.Offset > size {
				t.Errorf("a ReadError at byte %d of %d: %v", re.Offset, size, err)
			}
		case errors.As(err, &be):
			if be.Budget == "memory" && c.estimate <= be.Limit {
				t.Errorf("refused for memory with an estimate of %d within %d", c.estimate, be.Limit)
			}
			if be.Budget == "visits" && c.visits <= be.Limit {
				t.Errorf("refused for visits with %d within %d", c.visits, be.Limit)
			}
		case err == nil:
			if werr := WriteText(io.Discard, d, 20); werr != nil {
				t.Errorf("WriteText: %v", werr)
			}
		}
		if int64(decoded) > c.estimate+fuzzDecodeSlack {
			t.Errorf("decoding %d bytes allocated %d, past the guard's estimate of %d", size, decoded, c.estimate)
		}
		total := int64(decoded + summed)
		if limit := fuzzAllocPerByte*size + fuzzAllocBase; total > limit {
			t.Errorf("reading %d bytes allocated %d, past %d (%d a byte + %d)", size, total, limit, fuzzAllocPerByte, fuzzAllocBase)
		}
		if limit := fuzzCPUBase + time.Duration(size)*fuzzCPUPerByte; cpu > limit {
			t.Errorf("reading %d bytes took %v of CPU (%v wall), past %v", size, cpu, wall, limit)
		}
		fuzzStats.note(size, total, c, cpu, wall)
	})
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fuzzStats keeps the worst input seen (the most allocated per byte of
// input, the most CPU) and, when GPUTOP_FUZZ_STATS names a file, appends
// a line to it at each new worst: what a run of fuzzing found, for the
// benchmarks.
var fuzzStats fuzzMax

type fuzzMax struct {
	ratio float64 // bytes allocated a byte, past the first 64 KiB
	cpu   time.Duration
}

func (s *fuzzMax) note(size, total int64, c cost, cpu, wall time.Duration) {
	ratio := float64(total) / float64(max(size, 64<<10))
	var what []string
	if ratio > s.ratio {
		s.ratio = ratio
		what = append(what, "alloc")
	}
	if cpu > s.cpu {
		s.cpu = cpu
		what = append(what, "cpu")
	}
	path := os.Getenv("GPUTOP_FUZZ_STATS")
	if len(what) == 0 || path == "" {
		return
	}
	line := fmt.Sprintf("%s new max %s: %d bytes in, %d allocated (%.1f a byte past 64 KiB; estimate %d), %d visits, cpu %v, wall %v\n",
		time.Now().Format(time.RFC3339), strings.Join(what, "+"), size, total, ratio, c.estimate, c.visits, cpu, wall)
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		f.WriteString(line)
		f.Close()
	}
}
