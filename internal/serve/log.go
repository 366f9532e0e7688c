package serve

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogOptions select the log output of a command: the `log:` section of
// the broker's and the gateway's configuration, and what the other
// commands' flags (--log-level, -v) amount to.
type LogOptions struct {
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
}

// ParseLevel parses a log level name: debug, info, warn (or warning) or
// error, in any case; "" is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
}

// CheckFormat reports whether f is a log format: text or json, in any
// case; "" is text.
func CheckFormat(f string) error {
	switch strings.ToLower(f) {
	case "", "text", "json":
		return nil
	}
	return fmt.Errorf("want text or json, got %q", f)
}

// NewLogger returns the logger o selects, writing to w, and the level
// variable it filters with (a caller may raise it later, e.g. to keep a
// failed start to its one error line).
func NewLogger(w io.Writer, o LogOptions) (*slog.Logger, *slog.LevelVar, error) {
	level, err := ParseLevel(o.Level)
	if err != nil {
		return nil, nil, fmt.Errorf("log level: %w", err)
	}
	if err := CheckFormat(o.Format); err != nil {
		return nil, nil, fmt.Errorf("log format: %w", err)
	}
	lv := new(slog.LevelVar)
	lv.Set(level)
	if strings.EqualFold(o.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), lv, nil
	}
	return LoggerAt(w, lv), lv, nil
}

// LoggerAt is the text logger NewLogger builds, at a level the caller
// chose itself (a command's -v): it cannot fail.
func LoggerAt(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// WithDefaults returns o with an empty Format "text" and an empty Level
// "info" (what --print-config shows).
func (o LogOptions) WithDefaults() LogOptions {
	if o.Format == "" {
		o.Format = "text"
	}
	if o.Level == "" {
		o.Level = "info"
	}
	return o
}
