package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// serverLog takes the lines the HTTP server and exporter-toolkit write (a
// failed TLS handshake, an accept error, a web configuration that no
// longer parses) to gputop's log instead of stderr, where they would be
// drawn over the TUI. Anyone who can connect can make such lines, so at
// most one passes per logEvery; the rest are counted and the count logged
// with the newest of them.
type serverLog struct {
	log   func(string)
	every time.Duration

	mu     sync.Mutex
	last   time.Time // when a line was last logged
	held   int       // lines not logged since
	newest string
}

const (
	logEvery = 10 * time.Second
	// maxLogLine clips a line: some carry what a client sent
	maxLogLine = 200
)

func (l *serverLog) Write(p []byte) (int, error) {
	l.line(string(p))
	return len(p), nil
}

func (l *serverLog) line(s string) {
	s = strings.TrimSpace(s)
	if len(s) > maxLogLine {
		cut := maxLogLine
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	l.mu.Lock()
	if now := time.Now(); now.Sub(l.last) >= l.every {
		l.last = now
		l.mu.Unlock()
		l.log("metrics: " + s)
		return
	}
	l.held++
	l.newest = s
	l.mu.Unlock()
}

// flush logs the count of lines held back, once logEvery has passed.
func (l *serverLog) flush(now time.Time) {
	l.mu.Lock()
	if l.held == 0 || now.Sub(l.last) < l.every {
		l.mu.Unlock()
		return
	}
	n, s := l.held, l.newest
	l.held, l.newest, l.last = 0, "", now
	l.mu.Unlock()
	l.log(fmt.Sprintf("metrics: %d more HTTP server errors not shown, the newest: %s", n, s))
}

// slogHandler is exporter-toolkit's logger: warnings and errors go to the
// serverLog, its news that it is listening goes nowhere.
type slogHandler struct{ l *serverLog }

func (h slogHandler) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (h slogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.l.line(b.String())
	return nil
}

func (h slogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h slogHandler) WithGroup(string) slog.Handler      { return h }
