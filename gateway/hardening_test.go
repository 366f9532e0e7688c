package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/internal/certs"
	iotqtest "github.com/iotq/iotq/internal/testutil"
)

// Misbehaving clients: plain quic-go clients on loopback, so the test
// decides exactly what goes on the wire (nothing, one byte then PINGs, a
// FIN), against gateways with short timeouts and small caps.

// startGatewayOpts starts a gateway with o (routes listen on a free
// loopback port; state in a temporary directory).
func startGatewayOpts(t *testing.T, o Options) *Gateway {
	t.Helper()
	for i := range o.Routes {
		if o.Routes[i].Listen == "" {
			o.Routes[i].Listen = "quic://127.0.0.1:0"
		}
	}
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	if o.Logger == nil {
		o.Logger = iotqtest.Logger(t)
	}
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// quicDial connects a raw quic-go client to g's first route (ALPN mqtt).
func quicDial(t *testing.T, g *Gateway, conf *quic.Config) (*quic.Conn, error) {
	t.Helper()
	pool, err := certs.CertPool(g.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(g.Endpoints()[0], "quic://")
	if conf == nil {
		conf = &quic.Config{}
	}
	conf.HandshakeIdleTimeout = iotqtest.Scale(10 * time.Second)
	tc := &tls.Config{RootCAs: pool, NextProtos: []string{"mqtt"}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	c, err := quic.DialAddr(ctxT(t, 10*time.Second), addr, tc, conf)
	if err == nil {
		t.Cleanup(func() { _ = c.CloseWithError(0, "") })
	}
	return c, err
}

// closedWith waits (bounded) for c to end and checks it was closed by the
// gateway with code and a reason containing want.
func closedWith(t *testing.T, c *quic.Conn, code uint64, want string) {
	t.Helper()
	select {
	case <-c.Context().Done():
	case <-time.After(iotqtest.Scale(15 * time.Second)):
		t.Fatalf("connection still open; want it closed with %#x", code)
	}
	checkAppError(t, context.Cause(c.Context()), code, want)
}

func checkAppError(t *testing.T, err error, code uint64, want string) {
	t.Helper()
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) || !ae.Remote || uint64(ae.ErrorCode) != code {
		t.Fatalf("closed with %v; want a remote application error %#x", err, code)
	}
	if !strings.Contains(ae.ErrorMessage, want) {
		t.Fatalf("reason %q does not contain %q", ae.ErrorMessage, want)
	}
}

// countingUpstream accepts TCP connections, counts them, reads until EOF
// and holds the connection until then; ended counts the connections that
// ended (EOF or error: the gateway released them).
type countingUpstream struct {
	*tcpServer
	accepted, ended atomic.Int64
}

func startCounting(t *testing.T) *countingUpstream {
	u := &countingUpstream{}
	u.tcpServer = startTCP(t, func(c net.Conn) {
		u.accepted.Add(1)
		_, _ = io.Copy(io.Discard, c)
		u.ended.Add(1)
	})
	return u
}

// TestFirstDataTimeout: a client that completes the handshake and then
// sends nothing is closed with CodeFirstDataTimeout, and no upstream
// connection was ever opened for it.
func TestFirstDataTimeout(t *testing.T) {
	up := startCounting(t)
	g := startGatewayOpts(t, Options{
		Routes:           []Route{{Upstreams: []string{up.url()}}},
		FirstDataTimeout: iotqtest.Scale(300 * time.Millisecond),
	})
	c, err := quicDial(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	closedWith(t, c, CodeFirstDataTimeout, "first_data_timeout")
	if n := up.accepted.Load(); n != 0 {
		t.Errorf("upstream connections %d; want none for a silent client", n)
	}
	label := g.routes[0].label
	if n := value(g.met.timeouts.WithLabelValues(label, timeoutFirst)); n != 1 {
		t.Errorf("first-data timeouts %v, want 1", n)
	}
	iotqtest.Eventually(t, 5*time.Second, func() error {
		if n := value(g.met.quicConns.WithLabelValues(label)); n != 0 {
			return fmt.Errorf("QUIC connections held %v", n)
		}
		return nil
	})
}

// TestDataIdleTimeout: a client sends one byte and then only QUIC PINGs
// (KeepAlivePeriod). The PINGs keep the QUIC connection alive, but no
// application data flows, so the gateway closes it with CodeIdleTimeout
// and releases the upstream connection.
func TestDataIdleTimeout(t *testing.T) {
	up := startCounting(t)
	g := startGatewayOpts(t, Options{
		Routes:          []Route{{Upstreams: []string{up.url()}}},
		IdleTimeout:     iotqtest.Scale(2 * time.Second), // QUIC idle: PINGs every 100ms keep it alive
		DataIdleTimeout: iotqtest.Scale(600 * time.Millisecond),
	})
	c, err := quicDial(t, g, &quic.Config{KeepAlivePeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	str, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write([]byte{0x10}); err != nil {
		t.Fatal(err)
	}
	closedWith(t, c, CodeIdleTimeout, "data_idle_timeout")
	iotqtest.Eventually(t, 5*time.Second, func() error {
		if a, e := up.accepted.Load(), up.ended.Load(); a != 1 || e != 1 {
			return fmt.Errorf("upstream connections accepted %d, ended %d; want 1, 1", a, e)
		}
		return nil
	})
	label := g.routes[0].label
	if n := value(g.met.timeouts.WithLabelValues(label, timeoutIdle)); n != 1 {
		t.Errorf("idle timeouts %v, want 1", n)
	}
	if n := value(g.met.closed.WithLabelValues(label, reasonIdle)); n != 1 {
		t.Errorf("closed for idle %v, want 1", n)
	}
}

// TestHalfCloseTimeout: the client ends its stream; the upstream reads the
// FIN but never ends its side. After HalfCloseTimeout the gateway closes
// both (CodeHalfCloseTimeout).
func TestHalfCloseTimeout(t *testing.T) {
	var upEnded atomic.Bool
	up := startTCP(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // until the forwarded FIN
		// Never close: wait until the gateway closes the connection.
		_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(20 * time.Second)))
		_, err := c.Write([]byte("late"))
		for err == nil {
			_, err = c.Write([]byte("x"))
			time.Sleep(10 * time.Millisecond)
		}
		upEnded.Store(true)
	})
	g := startGatewayOpts(t, Options{
		Routes:           []Route{{Upstreams: []string{up.url()}}},
		HalfCloseTimeout: iotqtest.Scale(300 * time.Millisecond),
	})
	c, err := quicDial(t, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	str, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := str.Close(); err != nil { // FIN: our direction ends
		t.Fatal(err)
	}
	// Keep reading what the upstream sends until the gateway gives up.
	_, err = io.Copy(io.Discard, str)
	checkAppError(t, err, CodeHalfCloseTimeout, "half_close_timeout")
	iotqtest.Eventually(t, 5*time.Second, func() error {
		if !upEnded.Load() {
			return errors.New("upstream connection still open")
		}
		return nil
	})
	if n := value(g.met.timeouts.WithLabelValues(g.routes[0].label, timeoutHalf)); n != 1 {
		t.Errorf("half-close timeouts %v, want 1", n)
	}
}

// openWith opens a stream on c and sends one byte (the gateway then holds
// an upstream connection for it).
func openWith(t *testing.T, c *quic.Conn) *quic.Stream {
	t.Helper()
	str, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := str.Write([]byte{0x10}); err != nil {
		t.Fatal(err)
	}
	return str
}

// refusedWith dials and expects the connection to be refused with
// CodeConnectionLimit naming limit (the refusal may end the dial itself).
func refusedWith(t *testing.T, g *Gateway, limit string) {
	t.Helper()
	c, err := quicDial(t, g, nil)
	if err != nil {
		checkAppError(t, err, CodeConnectionLimit, limit)
		return
	}
	closedWith(t, c, CodeConnectionLimit, limit)
}

// TestConnectionCaps: one source past max_connections_per_source is
// refused with CodeConnectionLimit and a reason naming the limit; closing
// a connection frees its place. The same for max_connections.
func TestConnectionCaps(t *testing.T) {
	up := startCounting(t)
	t.Run("per_source", func(t *testing.T) {
		g := startGatewayOpts(t, Options{
			Routes:                  []Route{{Upstreams: []string{up.url()}}},
			MaxConnectionsPerSource: 2,
		})
		var conns []*quic.Conn
		for range 2 {
			c, err := quicDial(t, g, nil)
			if err != nil {
				t.Fatal(err)
			}
			openWith(t, c)
			conns = append(conns, c)
		}
		refusedWith(t, g, "max_connections_per_source (2)")
		label := g.routes[0].label
		if n := value(g.met.refused.WithLabelValues(label, limitPerSource)); n != 1 {
			t.Errorf("refused per source %v, want 1", n)
		}
		for _, c := range conns {
			if c.Context().Err() != nil {
				t.Fatalf("an admitted connection was closed: %v", context.Cause(c.Context()))
			}
		}
		_ = conns[0].CloseWithError(0, "")
		iotqtest.Eventually(t, 5*time.Second, func() error {
			if n := value(g.met.quicConns.WithLabelValues(label)); n != 1 {
				return fmt.Errorf("QUIC connections held %v, want 1", n)
			}
			return nil
		})
		c, err := quicDial(t, g, nil)
		if err != nil {
			t.Fatalf("after one closed: %v", err)
		}
		openWith(t, c)
		time.Sleep(iotqtest.Scale(100 * time.Millisecond)) // a refusal would arrive meanwhile
		if c.Context().Err() != nil {
			t.Fatalf("refused after a place was freed: %v", context.Cause(c.Context()))
		}
	})
	t.Run("total", func(t *testing.T) {
		g := startGatewayOpts(t, Options{
			Routes:                  []Route{{Upstreams: []string{up.url()}}},
			MaxConnections:          1,
			MaxConnectionsPerSource: -1,
		})
		c, err := quicDial(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		openWith(t, c)
		refusedWith(t, g, "max_connections (1)")
		if n := value(g.met.refused.WithLabelValues(g.routes[0].label, limitTotal)); n != 1 {
			t.Errorf("refused in total %v, want 1", n)
		}
	})
}

// echoUpstream echoes every connection.
func echoUpstream(t *testing.T) *tcpServer {
	return startTCP(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// roundTrip opens a stream on a new connection, sends msg and reads the
// echo.
func roundTrip(t *testing.T, g *Gateway, msg string) error {
	c, err := quicDial(t, g, nil)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.CloseWithError(0, "")
	str, err := c.OpenStream()
	if err != nil {
		return err
	}
	if _, err := str.Write([]byte(msg)); err != nil {
		return err
	}
	_ = str.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(str, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// TestRetry: with retry: always every new connection goes through a QUIC
// Retry (counted) and still works; with retry: auto a burst of handshakes
// above retry_rate turns Retry on, and every connection of the burst still
// completes.
func TestRetry(t *testing.T) {
	up := echoUpstream(t)
	t.Run("always", func(t *testing.T) {
		g := startGatewayOpts(t, Options{Routes: []Route{{Upstreams: []string{up.url()}}}, Retry: RetryAlways})
		for i := range 3 {
			if err := roundTrip(t, g, fmt.Sprintf("hello %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if n := value(g.met.retries.WithLabelValues(g.routes[0].label)); n != 3 {
			t.Errorf("retries %v, want 3 (one per connection)", n)
		}
	})
	t.Run("never", func(t *testing.T) {
		g := startGatewayOpts(t, Options{Routes: []Route{{Upstreams: []string{up.url()}}}, Retry: RetryNever, RetryRate: 1})
		for i := range 3 {
			if err := roundTrip(t, g, fmt.Sprintf("hello %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if n := value(g.met.retries.WithLabelValues(g.routes[0].label)); n != 0 {
			t.Errorf("retries %v, want 0", n)
		}
	})
	t.Run("flood", func(t *testing.T) {
		g := startGatewayOpts(t, Options{Routes: []Route{{Upstreams: []string{up.url()}}}, RetryRate: 1})
		const n = 12
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- roundTrip(t, g, fmt.Sprintf("flood %d", i))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		// At least the attempts past the rate (1 per second) were
		// validated; a loaded machine spreads the burst over more time,
		// so only "some" is certain.
		if r := value(g.met.retries.WithLabelValues(g.routes[0].label)); r < 1 || r > n {
			t.Errorf("retries %v; want between 1 and %d", r, n)
		}
	})
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProxyProtocolNotSpoken: an upstream that reads the PROXY v2 header
// and closes (what a broker without PROXY protocol does with it): every
// client gets CodeUpstreamReset with a reason saying the upstream
// probably does not speak PROXY protocol, and the gateway logs that once
// at info level (rate-limited), not once per connection.
func TestProxyProtocolNotSpoken(t *testing.T) {
	up := startTCP(t, func(c net.Conn) {
		hdr := make([]byte, 16)
		_, _ = io.ReadFull(c, hdr) // the signature and the header's length, then close
	})
	logs := &syncBuffer{}
	g := startGatewayOpts(t, Options{
		Routes: []Route{{Upstreams: []string{up.url()}, ProxyProtocol: true}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	const n = 3
	for range n {
		c, err := quicDial(t, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		str := openWith(t, c)
		_ = str.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
		_, err = io.Copy(io.Discard, str)
		checkAppError(t, err, CodeUpstreamReset, "probably does not speak PROXY protocol")
	}
	if got := strings.Count(logs.String(), "probably does not speak PROXY protocol"); got != 1 {
		t.Errorf("hint logged %d times, want once:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "level=INFO") {
		t.Errorf("hint not at info level:\n%s", logs.String())
	}
	if c := value(g.met.closed.WithLabelValues(g.routes[0].label, reasonNoProxy)); c != n {
		t.Errorf("closed for PROXY protocol %v, want %d", c, n)
	}
}

// TestDocsExampleConfig: the YAML example of docs/gateway.md parses and
// validates, carries the limits with their documented defaults, and sends
// no PROXY header to the Artemis route (Artemis does not read it).
func TestDocsExampleConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	if !ok {
		t.Fatal("no yaml block in docs/gateway.md")
	}
	block, _, _ := strings.Cut(rest, "```")
	// The example names a TLS host only; the files it would name are absent.
	o, err := ParseConfig("docs/gateway.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	d := Options{Routes: o.Routes}.WithDefaults()
	if o.FirstDataTimeout != d.FirstDataTimeout || o.DataIdleTimeout != d.DataIdleTimeout || o.HalfCloseTimeout != d.HalfCloseTimeout ||
		o.MaxConnections != d.MaxConnections || o.MaxConnectionsPerSource != d.MaxConnectionsPerSource ||
		o.Retry != d.Retry || o.RetryRate != d.RetryRate || o.RetryHandshakes != d.RetryHandshakes {
		t.Errorf("the example's limits differ from the defaults:\n%+v\n%+v", o, d)
	}
	if len(o.Routes) == 0 || o.Routes[0].ProxyProtocol {
		t.Errorf("routes[0] (Artemis) has proxy_protocol on, or no route: %+v", o.Routes)
	}
	bad := "routes:\n  - listen: quic://127.0.0.1:1\n    upstreams: [tcp://127.0.0.1:1]\nmax_connections: -2\nretry: sometimes\nfirst_data_timeout: -1s\nretry_rate: -1\n"
	_, err = ParseConfig("bad", []byte(bad))
	for _, want := range []string{"bad:4: max_connections", "bad:5: retry", "bad:6: first_data_timeout", "bad:7: retry_rate"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
