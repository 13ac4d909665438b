package metrics

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connCap keeps at most max connections open. One past the cap closes
// another to make room, so connections left idle cannot lock a scraper
// out: the keep-alive idle longest, else the oldest that has not sent a
// whole request yet; when every one is busy answering, the newcomer is
// closed.
// Without a cap, idle connections held descriptors until gputop could
// accept nothing: not agents, not scrapes.
type connCap struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[*capConn]struct{}

	evicted, refused atomic.Int64 // counted for the log (Server.report)
}

// capConn is an accepted connection with what the cap needs of it.
type capConn struct {
	net.Conn
	l      *connCap
	once   sync.Once
	busy   bool      // a request is being answered (l.mu)
	served bool      // it has been answered once: a keep-alive (l.mu)
	since  time.Time // accepted, or last became idle (l.mu)
}

func newConnCap(ln net.Listener, max int) *connCap {
	return &connCap{Listener: ln, max: max, open: map[*capConn]struct{}{}}
}

func (l *connCap) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *capConn
		if len(l.open) >= l.max {
			for o := range l.open {
				if !o.busy && (victim == nil || o.before(victim)) {
					victim = o
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				c.Close()
				continue
			}
			delete(l.open, victim)
		}
		cc := &capConn{Conn: c, l: l, since: time.Now()}
		l.open[cc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.Close()
		}
		return cc, nil
	}
}

// track is the http.Server's ConnState hook: it tells the cap which
// connections are busy.
func (l *connCap) track(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	cc, ok := c.(*capConn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive, http.StateIdle:
		l.mu.Lock()
		cc.busy = s == http.StateActive
		if !cc.busy {
			cc.served, cc.since = true, time.Now()
		}
		l.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		l.forget(cc)
	}
}

// before says whether c goes before o to make room: keep-alives first,
// then the oldest (l.mu).
func (c *capConn) before(o *capConn) bool {
	if c.served != o.served {
		return c.served
	}
	return c.since.Before(o.since)
}

func (l *connCap) forget(cc *capConn) {
	l.mu.Lock()
	delete(l.open, cc)
	l.mu.Unlock()
}

// held is how many connections are open.
func (l *connCap) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open)
}

func (c *capConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.l.forget(c)
		err = c.Conn.Close()
	})
	return err
}
