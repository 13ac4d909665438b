// Unified memory: a GPU with no memory of its own to report (GH200, GB10)
// answers NVML's memory query with NOT_SUPPORTED (or a total of 0); its
// figures are then the system's, read from /proc/meminfo as nvtop does.

package sampler

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

const (
	// systemEvery is how often a unified-memory device's figures are
	// read: /proc/meminfo costs tens of microseconds a read, too much at
	// the 1 kHz of an NVML query, and the system's figure moves slowly.
	systemEvery = 100 * time.Millisecond
	// maxMeminfo bounds what is read of the meminfo file (about 1.5 KiB
	// on Linux).
	maxMeminfo = 64 << 10
)

// unifiedMemory says whether a device's first memory reading means its
// memory is the system's: NVML answered NOT_SUPPORTED, or a total of 0.
func unifiedMemory(total uint64, err error) bool {
	if err != nil {
		return errors.Is(err, nvml.ERROR_NOT_SUPPORTED)
	}
	return total == 0
}

// systemMemory reads the total and used bytes of the system's memory from
// a meminfo file: MemTotal, and MemTotal − MemAvailable used (what the
// kernel says could be had without swapping, as nvtop reads it on GB10).
func systemMemory(path string) (used, total uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("system memory: %w", err)
	}
	defer f.Close()
	var memTotal, avail uint64
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(io.LimitReader(f, maxMeminfo))
	for sc.Scan() && !(haveTotal && haveAvail) {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(k) {
		case "MemTotal":
			dst, haveTotal = &memTotal, true
		case "MemAvailable":
			dst, haveAvail = &avail, true
		default:
			continue
		}
		fs := bytes.Fields(v)
		if len(fs) != 2 || string(fs[1]) != "kB" {
			return 0, 0, fmt.Errorf("system memory: %s: %s is %q, want a number of kB", path, k, bytes.TrimSpace(v))
		}
		n, perr := strconv.ParseUint(string(fs[0]), 10, 64)
		if perr != nil || n > 1<<53 {
			return 0, 0, fmt.Errorf("system memory: %s: %s is %q, want a number of kB", path, k, fs[0])
		}
		*dst = n << 10
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("system memory: %s: %w", path, err)
	}
	switch {
	case !haveTotal:
		return 0, 0, fmt.Errorf("system memory: %s has no MemTotal line", path)
	case !haveAvail:
		return 0, 0, fmt.Errorf("system memory: %s has no MemAvailable line", path)
	case memTotal == 0 || avail > memTotal:
		return 0, 0, fmt.Errorf("system memory: %s: MemAvailable %d kB against MemTotal %d kB", path, avail>>10, memTotal>>10)
	}
	return memTotal - avail, memTotal, nil
}
