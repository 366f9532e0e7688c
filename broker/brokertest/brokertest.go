package brokertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/testutil"
)

// Start starts a broker with opts, listening on mqtt://127.0.0.1:0 if
// opts.Listen is empty, waits until it is ready and closes it in t.Cleanup.
// Use Endpoint (or srv.Endpoints()) for the real URLs.
func Start(t testing.TB, opts broker.Options) *broker.Server {
	t.Helper()
	if len(opts.Listen) == 0 {
		opts.Listen = []string{"mqtt://127.0.0.1:0"}
	}
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
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
		t.Fatalf("brokertest: new broker: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("brokertest: close broker: %v", err)
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("brokertest: start broker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	if err := srv.Ready(ctx); err != nil {
		t.Fatalf("brokertest: broker not ready: %v", err)
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
	t.Fatalf("brokertest: broker has no %s listener (has %v)", scheme, srv.Endpoints())
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
		t.Fatalf("brokertest: read CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("brokertest: no certificate in %s", srv.CAFile())
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}
