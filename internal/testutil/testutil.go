package testutil

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scale returns d multiplied by IOTQ_TIMESCALE (default 1), for timeouts on
// slow or loaded machines.
func Scale(d time.Duration) time.Duration {
	if s := os.Getenv("IOTQ_TIMESCALE"); s != "" {
		if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
			return time.Duration(float64(d) * f)
		}
	}
	return d
}

// Logger returns a logger for tests: discarded unless IOTQ_LOG is set to a
// level (debug, info, warn, error), in which case it writes to t.Log.
func Logger(t testing.TB) *slog.Logger {
	lv := os.Getenv("IOTQ_LOG")
	if lv == "" {
		return slog.New(slog.DiscardHandler)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(lv)); err != nil {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Eventually calls fn until it returns nil or timeout (scaled by
// IOTQ_TIMESCALE) passes; then it fails the test with fn's last error.
func Eventually(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(Scale(timeout))
	wait := time.Millisecond
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", Scale(timeout), err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// InCI reports whether the tests run under CI (CI=true), where a missing
// capability or peer must fail a test, never skip it.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test with msg, or fails it under CI=true: a test
// that needs something CI provides must never pass silently there.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
}

// RequireNetAdmin skips the test unless it runs as root with /dev/net/tun
// and every extra check (for example link.Preflight) passes, except when
// CI=true, where a missing capability fails the test.
func RequireNetAdmin(t testing.TB, checks ...func() error) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (CAP_NET_ADMIN)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		missing = append(missing, "/dev/net/tun")
	}
	for _, check := range checks {
		if err := check(); err != nil {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) > 0 {
		SkipOrFail(t, "needs %s", strings.Join(missing, " and "))
	}
}
