package mochi

import (
	"log/slog"
	"sync"
	"time"
)

// rateLimitedLog logs at most once per interval and reports how many
// messages it suppressed in between. Use it for every log line that can
// repeat per message or per connection attempt.
type rateLimitedLog struct {
	log *slog.Logger
	gate
}

func newRateLimitedLog(l *slog.Logger, every time.Duration) *rateLimitedLog {
	return &rateLimitedLog{log: l, gate: gate{interval: every}}
}

func (r *rateLimitedLog) warn(msg string, args ...any) {
	if n, ok := r.pass(); ok {
		if n > 0 {
			args = append(args, "suppressed_since_last", n)
		}
		r.log.Warn(msg, args...)
	}
}

// gate lets one event through per interval and counts the others.
type gate struct {
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// pass reports whether the event may be logged now and, if so, how many
// were suppressed since the last one that passed.
func (g *gate) pass() (suppressed int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if !g.last.IsZero() && now.Sub(g.last) < g.interval {
		g.suppressed++
		return 0, false
	}
	n := g.suppressed
	g.suppressed = 0
	g.last = now
	return n, true
}
