// Package units writes byte counts the one way gputop's tables, verdicts
// and dump reports all write them, so a figure reads the same everywhere.
package units

import "fmt"

// Bytes formats b with a unit chosen for a short, readable figure: B, KiB
// and MiB with one decimal, GiB with two below 100 GiB and one above.
func Bytes(b uint64) string {
	const kib, mib, gib = 1 << 10, 1 << 20, 1 << 30
	switch {
	case b >= 100*gib:
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	case b >= gib:
		return fmt.Sprintf("%.2f GiB", float64(b)/gib)
	case b >= mib:
		return fmt.Sprintf("%.1f MiB", float64(b)/mib)
	case b >= kib:
		return fmt.Sprintf("%.1f KiB", float64(b)/kib)
	}
	return fmt.Sprintf("%d B", b)
}
