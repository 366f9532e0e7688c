package transport

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQUICMigrate: a client moves its connection to a socket on another
// loopback address (127.0.0.2) twice; the same stream goes on carrying
// data both ways, and the server sees the new address on the same conn.
// Migrating a TCP conn, a server's conn or a closed conn fails with an
// error that says what to do.
func TestQUICMigrate(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	echo := startEcho(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "quic://"+l.Addr().String(), DialOptions{TLSConfig: cliTLS, QUIC: QUICOptions{Disable0RTT: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, []byte("before migration"))
	conns := echo.conns()
	if len(conns) != 1 {
		t.Fatalf("server accepted %d conns, want 1", len(conns))
	}
	srvConn := conns[0]
	if got := srvConn.RemoteAddr().(*net.UDPAddr).IP.String(); got != "127.0.0.1" {
		t.Fatalf("server sees the client at %s before migrating, want 127.0.0.1", got)
	}
	oldPort := srvConn.RemoteAddr().(*net.UDPAddr).Port

	if err := Migrate(ctx, c, "127.0.0.2:0"); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	roundTrip(t, c, []byte("after the first migration"))
	if got := srvConn.RemoteAddr().(*net.UDPAddr).IP.String(); got != "127.0.0.2" {
		t.Fatalf("server sees the client at %s after migrating, want 127.0.0.2", got)
	}
	if err := Migrate(ctx, c, "127.0.0.1:0"); err != nil {
		t.Fatalf("migrate back: %v", err)
	}
	roundTrip(t, c, []byte("after the second migration"))
	ra := srvConn.RemoteAddr().(*net.UDPAddr)
	if ra.IP.String() != "127.0.0.1" || ra.Port == oldPort {
		t.Fatalf("server sees the client at %s after the second migration, want 127.0.0.1 on a port other than %d", ra, oldPort)
	}

	if err := Migrate(ctx, srvConn, "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "only a client") {
		t.Fatalf("server-side migrate: %v, want an error saying only a client can", err)
	}
	if err := Migrate(ctx, c, "192.0.2.1:0"); err == nil || !strings.Contains(err.Error(), "pick an address") {
		t.Fatalf("migrate to an address not on this host: %v, want a bind error with a hint", err)
	}
	roundTrip(t, c, []byte("still on the old path after a failed migration"))
	c.Close()
	if err := Migrate(ctx, c, "127.0.0.2:0"); err == nil {
		t.Fatal("migrating a closed conn succeeded")
	}

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tc, err := Dial(ctx, "mqtt://"+tcp.Addr().String(), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if err := Migrate(ctx, tc, "127.0.0.2:0"); err == nil || !strings.Contains(err.Error(), "reconnect") {
		t.Fatalf("TCP migrate: %v, want an error saying to reconnect", err)
	}
}

// TestQUICMigrateMultiStream: a per-topic multi-stream client migrates
// between two PUBLISH packets on the same topic; both arrive on the
// broker's session over one data stream (the stream survived the move),
// and the broker's PUBACKs reach the client.
func TestQUICMigrateMultiStream(t *testing.T) {
	noLeak(t)
	cnt := &QUICStreamCounters{}
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 10, Counters: cnt})
	c, sc := dialClientMux(t, f, QUICClientStreams{Strategy: StrategyPerTopic})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := uint16(1); i <= 2; i++ {
		if i == 2 {
			if err := Migrate(ctx, c, "127.0.0.2:0"); err != nil {
				t.Fatalf("migrate: %v", err)
			}
		}
		if _, err := c.Write(publishQoS1("a", i, "m")); err != nil {
			t.Fatal(err)
		}
		pk := readMQTT(t, sc)
		if p, ok := parsePublish(pk, true); !ok || pk[0]>>4 != 3 || p.id != i {
			t.Fatalf("session read % x, want PUBLISH %d", pk, i)
		}
		if _, err := sc.Write(mqttPacket(0x40, 0, byte(i))); err != nil {
			t.Fatal(err)
		}
		if pk := readMQTT(t, c); pk[0] != 0x40 || pk[3] != byte(i) {
			t.Fatalf("client read % x, want PUBACK %d", pk, i)
		}
	}
	if n := cnt.DataStreams.Load(); n != 1 {
		t.Fatalf("broker accepted %d data streams, want 1 (the topic's stream kept across the move)", n)
	}
	if ip := sc.RemoteAddr().(*net.UDPAddr).IP.String(); ip != "127.0.0.2" {
		t.Fatalf("broker sees the client at %s, want 127.0.0.2", ip)
	}
}

// TestQUICMigrateProbeUnanswered: the broker is reached through a relay
// that forwards only from the client's first address, as a firewall
// would; a move to 127.0.0.2 gets no answer to its probe, so Migrate
// fails with a hint and the connection goes on on its old path.
func TestQUICMigrateProbeUnanswered(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	front := filterRelay(t, l.Addr().(*net.UDPAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "quic://"+front, DialOptions{TLSConfig: cliTLS, QUIC: QUICOptions{Disable0RTT: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, []byte("before"))
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	err = Migrate(pctx, c, "127.0.0.2:0")
	pcancel()
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("migrate behind a firewall: %v, want a probe error with a hint", err)
	}
	roundTrip(t, c, []byte("still on the old path"))
}

// filterRelay forwards datagrams to upstream from the first client
// address it hears and drops those from any other, and returns its
// address. It stops at cleanup.
func filterRelay(t *testing.T, upstream *net.UDPAddr) string {
	t.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp4", nil, upstream)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		cli *net.UDPAddr
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			if cli == nil {
				cli = from
			}
			ok := cli.String() == from.String()
			mu.Unlock()
			if ok {
				_, _ = up.Write(buf[:n])
			}
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			mu.Lock()
			to := cli
			mu.Unlock()
			if to != nil {
				_, _ = front.WriteToUDP(buf[:n], to)
			}
		}
	}()
	t.Cleanup(func() {
		_ = front.Close()
		_ = up.Close()
		wg.Wait()
	})
	return front.LocalAddr().String()
}

// TestQUICMigrateLimit: a connection moves maxMigrations times (each
// move a new socket, the data still echoed), then Migrate refuses with a
// hint and the connection goes on.
func TestQUICMigrateLimit(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "quic://"+l.Addr().String(), DialOptions{TLSConfig: cliTLS, QUIC: QUICOptions{Disable0RTT: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range maxMigrations {
		if err := Migrate(ctx, c, "127.0.0.2:0"); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
		roundTrip(t, c, []byte("after migration "+strconv.Itoa(i+1)))
	}
	if err := Migrate(ctx, c, "127.0.0.2:0"); err == nil || !strings.Contains(err.Error(), "reconnect instead") {
		t.Fatalf("migration past the limit: %v, want a refusal saying to reconnect", err)
	}
	roundTrip(t, c, []byte("after the refused migration"))
}
