//go:build !linux

package agentlink

import (
	"errors"
	"net"
)

// peerCred is only implemented on Linux; elsewhere every peer is refused
// rather than trusted unchecked.
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.New("peer credentials are only checked on Linux")
}

// nsPID is only implemented on Linux.
func nsPID(pid int) []int { return nil }
