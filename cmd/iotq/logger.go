package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/iotq/iotq/internal/serve"
)

// newLogger is the one logger set-up of every command (broker, gateway,
// lab, link, report): o's format and level (package serve), errors named
// after the flags. The level variable lets runServer quieten a server
// whose start failed.
func newLogger(w io.Writer, o serve.LogOptions) (*slog.Logger, *slog.LevelVar, error) {
	if _, err := serve.ParseLevel(o.Level); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	if err := serve.CheckFormat(o.Format); err != nil {
		return nil, nil, fmt.Errorf("--log-format: %w", err)
	}
	return serve.NewLogger(w, o)
}

// levelLogger is newLogger's text logger at a level the command chose
// itself (link's and report's -v).
func levelLogger(w io.Writer, level slog.Level) *slog.Logger { return serve.LoggerAt(w, level) }
