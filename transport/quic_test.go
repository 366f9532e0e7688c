package transport

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/quic-go/quic-go"
)

// quicEcho starts a QUIC echo listener on addr ("127.0.0.1:0" or a fixed
// port for restarts) and returns it.
func quicEcho(t *testing.T, addr string, srv *tls.Config, q QUICOptions) Listener {
	t.Helper()
	var l Listener
	var err error
	// A just-closed UDP port may need a moment before it binds again.
	for i := 0; i < 50; i++ {
		l, err = Listen("quic://"+addr, ListenOptions{TLSConfig: srv, QUIC: q})
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	return l
}

// dialEcho dials url with a cache from file, does an echo round trip,
// closes and returns the client and the server view of the conn.
func dialEcho(t *testing.T, url string, cli *tls.Config, cacheFile string, q QUICOptions) Info {
	t.Helper()
	cache, err := NewFileSessionCache(cacheFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No cache.Close: closing the conn flushes the cache.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, DialOptions{TLSConfig: cli, SessionCache: cache, QUIC: q})
	if err != nil {
		t.Fatal(err)
	}
	// Written at once: with 0-RTT this rides in early data.
	roundTrip(t, c, []byte("CONNECT-ish first bytes"))
	roundTrip(t, c, []byte("and more after the handshake"))
	info := c.Info()
	c.Close()
	return info
}

// waitTicket waits until the cache file holds a ticket.
func waitTicket(t *testing.T, file string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := NewFileSessionCache(file, nil)
		if err == nil && c.Len() > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no session ticket was saved to the cache file")
}

func TestQUIC0RTTAcrossProcesses(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	cacheFile := filepath.Join(t.TempDir(), "sessions.json")

	first := dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	if first.Used0RTT || first.TLSResumed || first.Rejected0RTT {
		t.Fatalf("first connection without a ticket: %+v", first)
	}
	waitTicket(t, cacheFile)
	st, err := os.Stat(cacheFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %v, want 0600", st.Mode().Perm())
	}

	// A second cache object loaded from the file, as a new process would.
	second := dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	if !second.Used0RTT || !second.TLSResumed || second.Rejected0RTT {
		t.Fatalf("second connection: %+v, want Used0RTT and TLSResumed", second)
	}
	if !second.TransportReady.Before(second.HandshakeDone) {
		t.Errorf("0-RTT: TransportReady %v should precede HandshakeDone %v", second.TransportReady, second.HandshakeDone)
	}
	// Disable0RTT: resumes, but sends nothing early.
	third := dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{Disable0RTT: true})
	if third.Used0RTT || !third.TLSResumed {
		t.Fatalf("Disable0RTT: %+v, want resumed without 0-RTT", third)
	}
}

func TestQUIC0RTTServerSide(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srv})
	if err != nil {
		t.Fatal(err)
	}
	e := startEcho(t, l)
	cacheFile := filepath.Join(t.TempDir(), "s.json")
	dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)
	dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	conns := e.conns()
	if len(conns) != 2 {
		t.Fatalf("server accepted %d conns, want 2", len(conns))
	}
	i0, _ := conns[0].(Conn)
	i1, _ := conns[1].(Conn)
	if i0 == nil || i1 == nil {
		t.Fatal("server QUIC conns do not implement Conn")
	}
	if i0.Info().Used0RTT || !i1.Info().Used0RTT || !i1.Info().TLSResumed {
		t.Fatalf("server view: first %+v, second %+v", i0.Info(), i1.Info())
	}
	if st, ok := StatsOf(conns[1]); !ok || st.PacketsSent == 0 || st.SmoothedRTT <= 0 {
		t.Fatalf("StatsOf server conn = %+v, %v", st, ok)
	}
	if _, ok := StatsOf(&net.TCPConn{}); ok {
		t.Fatal("StatsOf a TCP conn says ok")
	}
}

// TestQUIC0RTTRejectedByOtherInstance: a ticket from a listener with other
// ticket keys (a restarted broker that does not persist them) is rejected;
// the client falls back and the data still arrives.
func TestQUIC0RTTRejectedByOtherInstance(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	addr := l.Endpoint().Address()
	cacheFile := filepath.Join(t.TempDir(), "sessions.json")
	dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)
	l.Close()

	oldTicket, err := os.ReadFile(cacheFile)
	if err != nil {
		t.Fatal(err)
	}

	// Same certificate, fresh random ticket keys. On a loaded machine the
	// whole 1-RTT handshake can complete before the client writes, so no
	// early data is offered; then try again with another fresh instance and
	// the old ticket (a few times, bounded).
	f := certs.FilesIn(dir)
	var info Info
	for range 5 {
		srv2, err := certs.ServerTLSConfig(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cacheFile, oldTicket, 0o600); err != nil {
			t.Fatal(err)
		}
		l2 := quicEcho(t, addr, srv2, QUICOptions{})
		info = dialEcho(t, l2.Endpoint().String(), cli, cacheFile, QUICOptions{})
		l2.Close()
		if info.Used0RTT {
			t.Fatalf("0-RTT accepted with a ticket from another instance: %+v", info)
		}
		if info.Rejected0RTT {
			return
		}
	}
	t.Fatalf("want Rejected0RTT (the client offered early data) in one of 5 tries: %+v", info)
}

// TestQUIC0RTTSurvivesRestart: with persisted ticket keys a restarted
// listener accepts the old ticket's 0-RTT.
func TestQUIC0RTTSurvivesRestart(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	addr := l.Endpoint().Address()
	cacheFile := filepath.Join(t.TempDir(), "sessions.json")
	dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)
	l.Close()

	srv2, _ := serverTLS(t, dir) // a new process: reload from the state dir
	l2 := quicEcho(t, addr, srv2, QUICOptions{})
	info := dialEcho(t, l2.Endpoint().String(), cli, cacheFile, QUICOptions{})
	if !info.Used0RTT || info.Rejected0RTT {
		t.Fatalf("after restart with persisted ticket keys: %+v, want Used0RTT", info)
	}
}

func TestQUICRefuse0RTT(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	addr := l.Endpoint().String()
	cacheFile := filepath.Join(t.TempDir(), "sessions.json")
	dialEcho(t, addr, cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)
	l.Close()

	// The same broker restarted with Refuse0RTT: the old ticket allows
	// early data, the server refuses it, data arrives over 1-RTT.
	srv2, _ := serverTLS(t, dir)
	l2 := quicEcho(t, l.Endpoint().Address(), srv2, QUICOptions{Refuse0RTT: true})
	info := dialEcho(t, l2.Endpoint().String(), cli, cacheFile, QUICOptions{})
	if info.Used0RTT {
		t.Fatalf("Refuse0RTT listener accepted early data: %+v", info)
	}
	if !info.TLSResumed {
		t.Errorf("want the session resumed (only early data refused): %+v", info)
	}
	// Tickets from a refusing listener do not offer early data at all.
	waitTicket(t, cacheFile)
	info = dialEcho(t, l2.Endpoint().String(), cli, cacheFile, QUICOptions{})
	if info.Used0RTT || info.Rejected0RTT {
		t.Fatalf("ticket from a Refuse0RTT listener: %+v, want a plain resumption", info)
	}
}

// TestQUICBadPeersDoNotDisturbListener: a wrong ALPN and garbage datagrams
// fail on their own while a good client keeps working.
func TestQUICBadPeersDoNotDisturbListener(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cli})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	roundTrip(t, good, []byte("before"))

	// Garbage datagrams at the listener's port.
	u, err := net.Dial("udp", l.Endpoint().Address())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		b := make([]byte, 1+i*7%1400)
		_, _ = rand.Read(b)
		_, _ = u.Write(b)
	}
	u.Close()

	// A client speaking another application protocol.
	badTLS := cli.Clone()
	badTLS.NextProtos = []string{"h3"}
	badTLS.ServerName = "127.0.0.1"
	_, err = quic.DialAddr(ctx, l.Endpoint().Address(), badTLS, &quic.Config{HandshakeIdleTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "no application protocol") {
		t.Fatalf("wrong ALPN: %v, want a no-application-protocol error", err)
	}
	// A client that never opens a stream would be closed after the
	// handshake idle timeout; meanwhile others are served.
	idle, err := quic.DialAddr(ctx, l.Endpoint().Address(), &tls.Config{RootCAs: cli.RootCAs, ServerName: "127.0.0.1", NextProtos: []string{ALPN}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.CloseWithError(0, "")

	roundTrip(t, good, []byte("after"))
	other, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cli})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, other, []byte("new client"))
	other.Close()
}

func TestQUICDialNoServer(t *testing.T) {
	// A UDP port with nobody listening: the handshake times out with a hint.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, "quic://"+addr, DialOptions{QUIC: QUICOptions{HandshakeIdleTimeout: 300 * time.Millisecond}})
	if err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "quic://"+addr) {
		t.Errorf("error does not name the URL: %v", err)
	}
}

func TestFileSessionCacheCorruptFileIsAMiss(t *testing.T) {
	name := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(name, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewFileSessionCache(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("x"); ok {
		t.Fatal("hit in a corrupt cache")
	}
	// A bad entry is a miss too.
	if err := os.WriteFile(name, []byte(`{"version":1,"entries":{"x":{"ticket":"AAAA","state":"AAAA"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = NewFileSessionCache(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get("x"); ok {
		t.Fatal("hit for an unparsable entry")
	}
	if _, err := NewFileSessionCache("", nil); err == nil {
		t.Fatal("empty name accepted")
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Fatal("unexpected")
	}
}

// TestTLSResumptionAcrossProcesses: mqtts and wss resume from a file cache
// (no early data over TCP in Go, but one handshake round trip saved in
// CPU and certificates).
func TestTLSResumptionAcrossProcesses(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	for _, s := range []Scheme{SchemeTLS, SchemeWSS} {
		t.Run(string(s), func(t *testing.T) {
			l, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{TLSConfig: srv})
			if err != nil {
				t.Fatal(err)
			}
			startEcho(t, l)
			cacheFile := filepath.Join(t.TempDir(), "c.json")
			first := dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
			if first.TLSResumed {
				t.Fatal("first connection resumed")
			}
			waitTicket(t, cacheFile)
			second := dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
			if !second.TLSResumed || second.Used0RTT {
				t.Fatalf("second connection %+v, want TLSResumed", second)
			}
		})
	}
}

// TestFileSessionCacheMergesProcesses: two cache objects on one file (two
// processes talking to two brokers) both end up in the file; Close flushes.
func TestFileSessionCacheMergesProcesses(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	file := filepath.Join(t.TempDir(), "shared.json")
	var urls []string
	for range 2 {
		l, err := Listen("mqtts://127.0.0.1:0", ListenOptions{TLSConfig: srv})
		if err != nil {
			t.Fatal(err)
		}
		startEcho(t, l)
		urls = append(urls, l.Endpoint().String())
	}
	a, err := NewFileSessionCache(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewFileSessionCache(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, cache := range []*FileSessionCache{a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := Dial(ctx, urls[i], DialOptions{TLSConfig: cli, SessionCache: cache})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, []byte("x")) // the ticket arrives with the reply
		c.Close()
		if err := cache.Close(); err != nil {
			t.Fatal(err)
		}
		if err := cache.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
	}
	fresh, err := NewFileSessionCache(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Len() != 2 {
		t.Fatalf("file holds %d sessions, want 2 (one per process)", fresh.Len())
	}
	var nilCache *FileSessionCache
	if nilCache.Close() != nil {
		t.Fatal("nil Close")
	}
}

// TestQUIC0RTTBudget: at most max0RTTBytes ride as early data; a larger
// first write waits for the handshake, and everything arrives.
func TestQUIC0RTTBudget(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	cacheFile := filepath.Join(t.TempDir(), "c.json")
	dialEcho(t, l.Endpoint().String(), cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)

	cache, err := NewFileSessionCache(cacheFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cli, SessionCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	qc := c.(*quicConn)
	select {
	case <-qc.conn.HandshakeComplete():
		t.Skip("handshake completed before the first write; nothing to check")
	default:
	}
	big := make([]byte, 3*max0RTTBytes)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(big)
		if err == nil {
			select {
			case <-qc.conn.HandshakeComplete():
			default:
				err = errors.New("a write larger than the 0-RTT budget returned before the handshake completed")
			}
		}
		errc <- err
	}()
	got := make([]byte, len(big))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !c.Info().Used0RTT {
		t.Fatal("0-RTT not used")
	}
}

// TestFileSessionCacheValues: opaque values (DTLS sessions) share the file
// with TLS tickets: they survive a new cache object on the file, are a
// miss for Get, and nil removes them.
func TestFileSessionCacheValues(t *testing.T) {
	name := filepath.Join(t.TempDir(), "c.json")
	a, err := NewFileSessionCache(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.SetValue("dtls|k", []byte("session"))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := NewFileSessionCache(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := b.Value("dtls|k"); !ok || string(v) != "session" {
		t.Fatalf("value after reload: %q %v", v, ok)
	}
	if _, ok := b.Get("dtls|k"); ok {
		t.Fatal("Get returned a TLS session for an opaque value")
	}
	b.SetValue("dtls|k", nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := NewFileSessionCache(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Value("dtls|k"); ok {
		t.Fatal("removed value still in the file")
	}
}

// TestQUICKeepAliveOutlivesIdleTimeout: a client with KeepAlivePeriod keeps
// a silent connection open past the listener's idle timeout; without it the
// connection is closed.
func TestQUICKeepAliveOutlivesIdleTimeout(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	const idle = time.Second
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{MaxIdleTimeout: idle})
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		alive     bool
	}{{"keep-alive", idle / 4, true}, {"none", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cli, QUIC: QUICOptions{MaxIdleTimeout: idle, KeepAlivePeriod: tc.keepAlive}})
			cancel() // the connection must not depend on the dial's context
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrip(t, c, []byte("before the silence"))
			time.Sleep(3 * idle)
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			msg := []byte("after the silence")
			_, werr := c.Write(msg)
			buf := make([]byte, len(msg))
			_, rerr := io.ReadFull(c, buf)
			if alive := werr == nil && rerr == nil; alive != tc.alive {
				t.Fatalf("after %v of silence with keep-alive %v: write %v, read %v; want alive=%v", 3*idle, tc.keepAlive, werr, rerr, tc.alive)
			}
		})
	}
}
