package testutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
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
	level, err := broker.ParseLevel(lv)
	if err != nil {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// StartBroker starts a broker with opts, listening on mqtt://127.0.0.1:0 if
// opts.Listen is empty, waits until it is ready and closes it in t.Cleanup.
// Use Endpoint (or srv.Endpoints()) for the real URLs.
func StartBroker(t testing.TB, opts broker.Options) *broker.Server {
	t.Helper()
	if len(opts.Listen) == 0 {
		opts.Listen = []string{"mqtt://127.0.0.1:0"}
	}
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 2 * time.Second
	}
	if opts.StateDir == "" && opts.TLS.Cert == "" {
		for _, l := range opts.Listen {
			if strings.HasPrefix(l, "mqtts:") || strings.HasPrefix(l, "wss:") || strings.HasPrefix(l, "quic:") {
				// Keep the generated CA out of the user's home directory.
				opts.StateDir = t.TempDir()
				opts.Store = broker.StoreNone
				break
			}
		}
	}
	srv, err := broker.New(opts)
	if err != nil {
		t.Fatalf("testutil: new broker: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("testutil: close broker: %v", err)
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("testutil: start broker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Scale(10*time.Second))
	defer cancel()
	if err := srv.Ready(ctx); err != nil {
		t.Fatalf("testutil: broker not ready: %v", err)
	}
	return srv
}

// Endpoint returns the first URL of srv with the given scheme ("mqtt",
// "mqtts", "ws", "wss", "quic"), failing the test if there is none.
func Endpoint(t testing.TB, srv *broker.Server, scheme string) string {
	t.Helper()
	for _, e := range srv.Endpoints() {
		if strings.HasPrefix(e, scheme+"://") {
			return e
		}
	}
	t.Fatalf("testutil: broker has no %s listener (has %v)", scheme, srv.Endpoints())
	return ""
}

// ClientTLS returns a client TLS configuration that trusts the CA the broker
// generated (ServerName 127.0.0.1), or nil if the broker has no generated
// CA.
func ClientTLS(t testing.TB, srv *broker.Server) *tls.Config {
	t.Helper()
	if srv.CAFile() == "" {
		return nil
	}
	b, err := os.ReadFile(srv.CAFile())
	if err != nil {
		t.Fatalf("testutil: read CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("testutil: no certificate in %s", srv.CAFile())
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
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

// RequireNetAdmin skips the test unless it runs as root with /dev/net/tun,
// except when CI=true, where a missing capability fails the test.
func RequireNetAdmin(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (CAP_NET_ADMIN)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		missing = append(missing, "/dev/net/tun")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("needs %s", strings.Join(missing, " and "))
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
}
