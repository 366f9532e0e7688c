package mochi

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// engineLogHandler tames mochi's logs: its Info lines ("added hook", "mochi
// mqtt starting") become Debug; the harmless "key not found" error that
// mochi's bolt hook logs on the first start of an empty store is dropped;
// and Warn and Error lines are rate-limited per message text (once a second,
// with the number suppressed), since several of them repeat per message
// ("client store quota reached", "error processing packet").
type engineLogHandler struct {
	slog.Handler
	gates *gateSet
}

func newEngineLogHandler(h slog.Handler) engineLogHandler {
	return engineLogHandler{Handler: h, gates: &gateSet{every: time.Second, m: map[string]*gate{}}}
}

// gateSet holds one gate per message text. mochi's messages are constants,
// so the map stays small; it is capped anyway.
type gateSet struct {
	every time.Duration
	mu    sync.Mutex
	m     map[string]*gate
}

const maxLogGates = 256

func (s *gateSet) get(msg string) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.m[msg]
	if !ok {
		if len(s.m) >= maxLogGates {
			msg = "" // one shared gate for the rest
			if g, ok = s.m[msg]; ok {
				return g
			}
		}
		g = &gate{interval: s.every}
		s.m[msg] = g
	}
	return g
}

func (h engineLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l)
}

func (h engineLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	if r.Level == slog.LevelError && r.Message == "failed to get data" {
		notFound := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" && strings.Contains(a.Value.String(), "key not found") {
				notFound = true
			}
			return true
		})
		if notFound {
			return nil
		}
	}
	if r.Level >= slog.LevelWarn {
		n, ok := h.gates.get(r.Message).pass()
		if !ok {
			return nil
		}
		if n > 0 {
			r.AddAttrs(slog.Int("suppressed_since_last", n))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h engineLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return engineLogHandler{Handler: h.Handler.WithAttrs(as), gates: h.gates}
}

func (h engineLogHandler) WithGroup(name string) slog.Handler {
	return engineLogHandler{Handler: h.Handler.WithGroup(name), gates: h.gates}
}
