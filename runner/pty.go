package runner

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal for the command in the TUI: the command sees a
// terminal (line-buffered output, progress bars, colours), gputop reads
// what it draws from the master.
type PTY struct {
	Master, Slave *os.File
}

// OpenPTY opens a new pseudo-terminal pair.
func OpenPTY() (*PTY, error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("pty number: %w", err)
	}
	name := "/dev/pts/" + strconv.Itoa(n)
	slave, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return &PTY{Master: master, Slave: slave}, nil
}

// SetSize tells the command its terminal's size.
func (p *PTY) SetSize(cols, rows int) error {
	if cols <= 0 || rows <= 0 {
		return nil
	}
	ws := &unix.Winsize{Col: uint16(min(cols, 65535)), Row: uint16(min(rows, 65535))}
	var err error
	p.control(func(fd int) { err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
	return err
}

// control runs f on the master's descriptor without making it blocking
// (File.Fd would, and a blocked read could then not be interrupted).
func (p *PTY) control(f func(fd int)) {
	if rc, err := p.Master.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { f(int(fd)) })
	}
}

// Foreground is the process group the terminal's keys go to (a shell in
// the command may have moved its job there); 0 when it cannot tell.
func (p *PTY) Foreground() int {
	g := 0
	p.control(func(fd int) {
		if v, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil {
			g = v
		}
	})
	return g
}
