package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/internal/certs"
	iotqtest "github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// tcpServer is a TCP upstream run by a test: handle runs for every
// connection on its own goroutine; Close waits for all of them.
type tcpServer struct {
	l  net.Listener
	wg sync.WaitGroup
}

func startTCP(t *testing.T, handle func(net.Conn)) *tcpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return s
}

func (s *tcpServer) url() string { return "tcp://" + s.l.Addr().String() }

// deadPort returns a loopback TCP port nobody listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "tcp://" + addr
}

// startGateway starts a gateway with the routes (listening on port 0 by
// default) in stateDir (a new temporary one if empty).
func startGateway(t *testing.T, stateDir string, routes ...Route) *Gateway {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	for i := range routes {
		if routes[i].Listen == "" {
			routes[i].Listen = "quic://127.0.0.1:0"
		}
	}
	g, err := New(Options{Routes: routes, StateDir: stateDir, Metrics: "127.0.0.1:0", Logger: iotqtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// dialALPN dials g's first route offering alpn, trusting g's CA, with a
// session cache (for 0-RTT on the next dial; nil: none).
func dialALPN(t *testing.T, g *Gateway, alpn string, cache tls.ClientSessionCache) (transport.Conn, error) {
	t.Helper()
	ep, err := transport.ParseURL(g.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	ep.ALPN = alpn
	return transport.DialEndpoint(ctxT(t, 10*time.Second), ep, transport.DialOptions{
		CAFile:       g.CAFile(),
		SessionCache: cache,
		QUIC:         transport.QUICOptions{HandshakeIdleTimeout: iotqtest.Scale(10 * time.Second)},
	})
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(d))
	t.Cleanup(cancel)
	return ctx
}

// TestHalfClose: the client sends data and ends its side; the upstream
// sees EOF (the gateway passed the FIN on), answers and closes; the client
// reads the answer and then EOF. Bytes are counted both ways.
func TestHalfClose(t *testing.T) {
	up := startTCP(t, func(c net.Conn) {
		b, err := io.ReadAll(c) // until the client's FIN, forwarded
		if err != nil {
			return
		}
		fmt.Fprintf(c, "got %d bytes", len(b))
	})
	g := startGateway(t, "", Route{Upstreams: []string{up.url()}, ALPN: []string{"test"}})
	c, err := dialALPN(t, g, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := bytes.Repeat([]byte("x"), 100000)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.(transport.QUICConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	if string(got) != "got 100000 bytes" {
		t.Fatalf("answer %q", got)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	label := g.routes[0].label
	iotqtest.Eventually(t, 5*time.Second, func() error {
		if n := value(g.met.closed.WithLabelValues(label, reasonNormal)); n != 1 {
			return fmt.Errorf("closed normally: %v", n)
		}
		if n := value(g.met.open.WithLabelValues(label)); n != 0 {
			return fmt.Errorf("open connections %v", n)
		}
		return nil
	})
	if n := value(g.met.bytes.WithLabelValues(label, dirToUpstream)); n != 100000 {
		t.Errorf("bytes to upstream %v", n)
	}
	if n := value(g.met.bytes.WithLabelValues(label, dirToClient)); n != 16 {
		t.Errorf("bytes to client %v", n)
	}
}

// TestUpstreamDown: no upstream answers: the failure is counted and the
// client's QUIC connection is closed with CodeUpstreamUnavailable.
func TestUpstreamDown(t *testing.T) {
	dead := deadPort(t)
	g := startGateway(t, "", Route{Upstreams: []string{dead}})
	c, err := dialALPN(t, g, "mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("hello"))
	_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	_, err = c.Read(make([]byte, 10))
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) || !ae.Remote || uint64(ae.ErrorCode) != CodeUpstreamUnavailable {
		t.Fatalf("read error %v; want a remote application error %#x", err, CodeUpstreamUnavailable)
	}
	// The reason names the broker behind the route by the ALPN, not the
	// client's port or protocol (the client's own hint follows it).
	if want := "could not connect to the MQTT broker behind this route"; !strings.Contains(ae.ErrorMessage, want) {
		t.Errorf("reason %q lacks %q", ae.ErrorMessage, want)
	}
	if got := upstreamDownReason("amqp"); !strings.Contains(got, "AMQP broker") || strings.Contains(got, "MQTT") {
		t.Errorf("reason for amqp %q: want the AMQP broker named, not MQTT", got)
	}
	label := g.routes[0].label
	if n := value(g.met.upFailures.WithLabelValues(label, dead)); n != 1 {
		t.Errorf("upstream failures %v, want 1", n)
	}
	if n := value(g.met.closed.WithLabelValues(label, reasonNoUp)); n != 1 {
		t.Errorf("closed for no upstream %v, want 1", n)
	}
	// The metrics endpoint serves the same counter.
	resp, err := http.Get("http://" + g.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`iotq_gateway_upstream_failures_total{route=%q,upstream=%q} 1`, label, dead)
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	resp, err = http.Get("http://" + g.MetricsAddr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %s", resp.Status)
	}
}

// echoID answers every connection with its name, then echoes.
func echoID(name string) func(net.Conn) {
	return func(c net.Conn) {
		_, _ = io.WriteString(c, name)
		_, _ = io.Copy(c, c)
	}
}

// firstBytes dials the route and returns the upstream's name.
func firstBytes(t *testing.T, g *Gateway, cache tls.ClientSessionCache) string {
	t.Helper()
	c, err := dialALPN(t, g, "mqtt", cache)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A QUIC stream reaches the gateway with its first bytes: the
	// client speaks first (as MQTT and AMQP clients do).
	if _, err := c.Write([]byte("?")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBalanceAndFailover: round robin spreads connections over the live
// upstreams and skips the dead one (counting each failure); client_hash
// keeps one client address on one upstream.
func TestBalanceAndFailover(t *testing.T) {
	a, b := startTCP(t, echoID("a")), startTCP(t, echoID("b"))
	dead := deadPort(t)
	g := startGateway(t, "", Route{Upstreams: []string{a.url(), dead, b.url()}})
	seen := map[string]int{}
	for range 6 {
		seen[firstBytes(t, g, nil)]++
	}
	if seen["a"] == 0 || seen["b"] == 0 || seen["a"]+seen["b"] != 6 {
		t.Fatalf("round robin: %v", seen)
	}
	if n := value(g.met.upFailures.WithLabelValues(g.routes[0].label, dead)); n < 1 {
		t.Errorf("dead upstream failures %v", n)
	}

	h := startGateway(t, "", Route{Upstreams: []string{a.url(), b.url()}, Balance: BalanceClientHash})
	first := firstBytes(t, h, nil)
	for range 3 {
		if got := firstBytes(t, h, nil); got != first {
			t.Fatalf("client_hash moved 127.0.0.1 from %s to %s", first, got)
		}
	}
}

// TestProxyProtocol: the upstream reads a PROXY v2 header naming the
// client's UDP address as the source.
func TestProxyProtocol(t *testing.T) {
	got := make(chan []byte, 1)
	up := startTCP(t, func(c net.Conn) {
		h := make([]byte, 16+12)
		if _, err := io.ReadFull(c, h); err != nil {
			return
		}
		got <- h
		_, _ = io.Copy(c, c)
	})
	g := startGateway(t, "", Route{Upstreams: []string{up.url()}, ProxyProtocol: true})
	c, err := dialALPN(t, g, "mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	var h []byte
	select {
	case h = <-got:
	case <-time.After(iotqtest.Scale(10 * time.Second)):
		t.Fatal("no PROXY header")
	}
	local := c.LocalAddr().(*net.UDPAddr)
	want := proxyV2Header(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: local.Port}, g.routes[0].ln.Addr())
	if !bytes.Equal(h, want) {
		t.Fatalf("header %x, want %x", h, want)
	}
	if !bytes.Equal(h[:12], proxyV2Signature) || h[12] != 0x21 || h[13] != 0x11 {
		t.Fatalf("not a v2 PROXY TCP4 header: %x", h[:16])
	}
	b := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo %q %v", b, err)
	}
}

// TestReplayPolicy: with policy alpn and early_data_alpn [mqtt], a
// resumed mqtt connection uses 0-RTT and a resumed amqp one is refused
// (and counted); both still work. A restarted gateway with the same state
// directory accepts the saved tickets (persisted ticket keys).
func TestReplayPolicy(t *testing.T) {
	up := startTCP(t, echoID("u"))
	state := t.TempDir()
	route := Route{Upstreams: []string{up.url()}, ALPN: []string{"mqtt", "amqp"}, EarlyData: records.EarlyALPN, EarlyDataALPN: []string{"mqtt"}}
	g := startGateway(t, state, route)
	label := g.routes[0].label
	// One cache per ALPN: a ticket records its ALPN, and a client offers
	// early data only for the ALPN the ticket was issued for.
	caches := map[string]tls.ClientSessionCache{"mqtt": tls.NewLRUClientSessionCache(8), "amqp": tls.NewLRUClientSessionCache(8)}
	info := func(alpn string) transport.Info {
		c, err := dialALPN(t, g, alpn, caches[alpn])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("early")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 6)
		_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "uearly" {
			t.Fatalf("%s: echo %q %v", alpn, b, err)
		}
		return c.Info()
	}
	for _, alpn := range []string{"mqtt", "amqp"} {
		if i := info(alpn); i.Used0RTT || i.NegotiatedProto != alpn {
			t.Fatalf("%s first connection: %+v", alpn, i)
		}
	}
	if i := info("mqtt"); !i.Used0RTT {
		t.Fatalf("mqtt second connection did not use 0-RTT: %+v", i)
	}
	if i := info("amqp"); i.Used0RTT || !i.Rejected0RTT || !i.TLSResumed {
		t.Fatalf("amqp second connection: want resumed, 0-RTT rejected: %+v", i)
	}
	iotqtest.Eventually(t, 5*time.Second, func() error {
		a := value(g.met.early.WithLabelValues(label, earlyAccepted))
		r := value(g.met.early.WithLabelValues(label, earlyRefused))
		if a != 1 || r != 1 {
			return fmt.Errorf("0-RTT accepted %v refused %v, want 1 and 1", a, r)
		}
		return nil
	})
	addr := g.Endpoints()[0]
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	route.Listen = addr // same port: tickets are keyed by address
	g = startGateway(t, state, route)
	if i := info("mqtt"); !i.Used0RTT {
		t.Fatalf("after a restart: no 0-RTT: %+v", i)
	}

	ref := startGateway(t, "", Route{Upstreams: []string{up.url()}, EarlyData: records.EarlyRefuse})
	g = ref
	info("mqtt")
	if i := info("mqtt"); i.Used0RTT || !i.TLSResumed {
		t.Fatalf("policy refuse: %+v", i)
	}
}

// TestReplayPolicyHold: with early_data hold, resumed mqtt and amqp
// connections still use 0-RTT and everything they sent (for mqtt a first
// MQTT packet, for amqp a start up to the first transfer frame, and bytes
// behind them, the latter forwarded once the handshake completed) reaches
// the upstream; another ALPN is refused 0-RTT. The replayed-flight
// behaviour of the same wrapper: broker TestQUIC0RTTReplay, and
// client/amqp TestEarlyReplay through this gateway to Artemis.
func TestReplayPolicyHold(t *testing.T) {
	up := startTCP(t, echoID("u"))
	g := startGateway(t, "", Route{Upstreams: []string{up.url()}, ALPN: []string{"mqtt", "amqp", "other"}, EarlyData: records.EarlyHold})
	caches := map[string]tls.ClientSessionCache{"mqtt": tls.NewLRUClientSessionCache(8), "amqp": tls.NewLRUClientSessionCache(8),
		"other": tls.NewLRUClientSessionCache(8)}
	flights := map[string][]byte{
		"mqtt":  []byte("\x10\x03abc" + "after the first packet"),
		"amqp":  append(append([]byte("AMQP\x00\x01\x00\x00"), amqpFrame(0, 0x12, []byte("attach"))...), amqpFrame(0, 0x14, []byte("transfer"))...),
		"other": []byte("anything"),
	}
	info := func(alpn string) transport.Info {
		flight := flights[alpn]
		c, err := dialALPN(t, g, alpn, caches[alpn])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(flight); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1+len(flight))
		_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "u"+string(flight) {
			t.Fatalf("%s: echo %q %v", alpn, b, err)
		}
		return c.Info()
	}
	for _, alpn := range []string{"mqtt", "amqp", "other"} {
		info(alpn)
	}
	for _, alpn := range []string{"mqtt", "amqp"} {
		if i := info(alpn); !i.Used0RTT {
			t.Fatalf("%s under hold did not use 0-RTT: %+v", alpn, i)
		}
	}
	if i := info("other"); i.Used0RTT || !i.Rejected0RTT {
		t.Fatalf("another ALPN under hold: want 0-RTT rejected: %+v", i)
	}
}

// TestBackpressure: an upstream that reads nothing stops the client after
// a bounded amount (QUIC flow control), instead of the gateway buffering
// everything.
func TestBackpressure(t *testing.T) {
	release := make(chan struct{})
	up := startTCP(t, func(c net.Conn) { <-release })
	defer close(release)
	g := startGateway(t, "", Route{Upstreams: []string{up.url()}})
	c, err := dialALPN(t, g, "mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(iotqtest.Scale(3 * time.Second)))
	const total = 256 << 20
	chunk := make([]byte, 1<<20)
	written := 0
	for written < total {
		n, err := c.Write(chunk)
		written += n
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write: %v", err)
			}
			break
		}
	}
	if written >= total {
		t.Fatalf("wrote all %d bytes to an upstream that reads nothing", written)
	}
	t.Logf("client blocked after %d KiB", written>>10)
}

func TestParseRouteAndConfig(t *testing.T) {
	r, err := ParseRoute("quic://0.0.0.0:5673?alpn=amqp&early_data=refuse&balance=client_hash&proxy_protocol=true=tcp://10.0.0.1:5672,tls://10.0.0.2:5671")
	if err != nil {
		t.Fatal(err)
	}
	if r.Listen != "quic://0.0.0.0:5673" || len(r.Upstreams) != 2 || r.Upstreams[1] != "tls://10.0.0.2:5671" ||
		r.ALPN[0] != "amqp" || r.EarlyData != records.EarlyRefuse || r.Balance != BalanceClientHash || !r.ProxyProtocol {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{"quic://h:1", "quic://h:1?color=red=tcp://u:1", "quic://h:1?proxy_protocol=maybe=tcp://u:1"} {
		if _, err := ParseRoute(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	_ = os.WriteFile(cfg, []byte("routes:\n  - listen: quic://127.0.0.1:5673\n    upstreams: [udp://x:1]\n    early_data: sometimes\n"), 0o600)
	_, err = LoadConfig(cfg)
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{":3: routes[0].upstreams[0]", ":4: routes[0].early_data", "want accept, refuse, alpn or hold"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_ = os.WriteFile(cfg, []byte("routes:\n  - listen: quic://127.0.0.1:5673\n    upstream: [tcp://x:1]\n"), 0o600)
	if _, err := LoadConfig(cfg); err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Errorf("unknown key: %v", err)
	}
	o, err := ParseConfig("ok", []byte("routes:\n  - listen: quic://127.0.0.1:5673\n    upstreams: [tcp://127.0.0.1:5672]\n    alpn: [amqp]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalConfig(o.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig("round trip", b)
	if err != nil || back.Routes[0].EarlyData != records.EarlyALPN || back.Routes[0].ALPN[0] != "amqp" {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

// value reads a counter or gauge.
func value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestTLSUpstream: a tls:// upstream is verified against upstream_tls's CA
// and forwarded; without that CA the handshake fails, the failure counts
// and the client gets CodeUpstreamUnavailable.
func TestTLSUpstream(t *testing.T) {
	files, err := certs.EnsureServerCert(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := certs.ServerTLSConfig(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	up := "tls://" + l.Addr().String()
	g := startGateway(t, "", Route{Upstreams: []string{up}, UpstreamTLS: UpstreamTLS{CAFile: files.CA}},
		Route{Upstreams: []string{up}})
	echo := func(ep string) error {
		e, err := transport.ParseURL(ep)
		if err != nil {
			t.Fatal(err)
		}
		c, err := transport.DialEndpoint(ctxT(t, 10*time.Second), e, transport.DialOptions{CAFile: g.CAFile()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("tls!")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil {
			return err
		}
		if string(b) != "tls!" {
			return fmt.Errorf("echo %q", b)
		}
		return nil
	}
	if err := echo(g.Endpoints()[0]); err != nil {
		t.Fatalf("verified TLS upstream: %v", err)
	}
	err = echo(g.Endpoints()[1])
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) || uint64(ae.ErrorCode) != CodeUpstreamUnavailable {
		t.Fatalf("unverifiable upstream: %v, want code %#x", err, CodeUpstreamUnavailable)
	}
	if n := value(g.met.upFailures.WithLabelValues(g.routes[1].label, up)); n != 1 {
		t.Errorf("upstream failures %v", n)
	}
}
