package coapdtls

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/dtls/v3"
)

func TestLoadPSKFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "psk")
	if err := os.WriteFile(good, []byte("# comment\n\ndev1:secret1\ndev2:0x736563726574\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadPSKFile(good)
	if err != nil || string(m["dev1"]) != "secret1" || string(m["dev2"]) != "secret" || len(m) != 2 {
		t.Fatalf("%v %q", err, m)
	}
	for _, bad := range []string{"nocolon\n", "dev:0xzz\n", ":key\n"} {
		p := filepath.Join(dir, "bad")
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPSKFile(p); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("%q: want an error naming line 1, got %v", bad, err)
		}
	}
	if m, err := LoadPSKFile(""); err != nil || len(m) != 0 {
		t.Fatal("empty path must give an empty map")
	}
}

// TestPSKSession: a datagram each way over a DTLS-PSK session; the server
// sees the client's identity; a wrong key fails the handshake.
func TestPSKSession(t *testing.T) {
	l, err := Listen("127.0.0.1:0", Config{PSK: map[string][]byte{"dev1": []byte("secret1")}, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.LocalAddr().String(), ClientConfig{Identity: "dev1", Key: []byte("secret1")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo([]byte("ping"), nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, from, err := l.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("%v %q", err, buf[:n])
	}
	if id := from.(Addr).Identity(); id != "dev1" {
		t.Fatalf("identity %q", id)
	}
	if _, err := l.WriteTo([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	if n, _, err = c.ReadFrom(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("%v %q", err, buf[:n])
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if c2, err := Dial(ctx2, l.LocalAddr().String(), ClientConfig{Identity: "dev1", Key: []byte("wrong")}); err == nil {
		c2.Close()
		t.Fatal("handshake with a wrong key succeeded")
	}
	var _ net.PacketConn = l
}

// countingProxy forwards datagrams between clients and target on
// loopback and counts them per direction. Each client gets its own
// upstream socket (like a NAT), so the server sees one address per client
// while the clients see one stable proxy address (the key of their stored
// sessions).
type countingProxy struct {
	pc *net.UDPConn

	mu       sync.Mutex
	up, down map[string]bool // distinct handshake flights seen
}

// flightKey names the handshake flight a datagram belongs to by its first
// DTLS record: content type and epoch, and for a plain-text handshake
// message its type and message_seq. A retransmitted flight has the same
// key; application data and alerts (a close_notify of the connection
// before) have none.
func flightKey(b []byte) string {
	if len(b) < 13 || b[0] == 21 || b[0] == 23 {
		return ""
	}
	key := fmt.Sprintf("type %d epoch %d", b[0], int(b[3])<<8|int(b[4]))
	if b[0] == 22 && b[3] == 0 && b[4] == 0 && len(b) >= 13+6 {
		key += fmt.Sprintf(" msg %d seq %d", b[13], int(b[17])<<8|int(b[18]))
	}
	return key
}

func (p *countingProxy) count(up bool, b []byte) {
	k := flightKey(b)
	if k == "" {
		return
	}
	p.mu.Lock()
	if up {
		p.up[k] = true
	} else {
		p.down[k] = true
	}
	p.mu.Unlock()
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{pc: pc, up: map[string]bool{}, down: map[string]bool{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	upstream := map[string]*net.UDPConn{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			mu.Lock()
			uc := upstream[from.String()]
			if uc == nil {
				uc, err = net.DialUDP("udp", nil, ta)
				if err != nil {
					mu.Unlock()
					continue
				}
				upstream[from.String()] = uc
				wg.Add(1)
				go func(client *net.UDPAddr) {
					defer wg.Done()
					b := make([]byte, 65535)
					for {
						n, err := uc.Read(b)
						if err != nil {
							return
						}
						p.count(false, b[:n])
						_, _ = pc.WriteToUDP(b[:n], client)
					}
				}(from)
			}
			mu.Unlock()
			p.count(true, buf[:n])
			_, _ = uc.Write(buf[:n])
		}
	}()
	t.Cleanup(func() {
		_ = pc.Close()
		mu.Lock()
		for _, uc := range upstream {
			_ = uc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *countingProxy) addr() string { return p.pc.LocalAddr().String() }

// reset returns the numbers of flights so far each way and forgets them.
func (p *countingProxy) reset() (up, down int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	up, down = len(p.up), len(p.down)
	p.up, p.down = map[string]bool{}, map[string]bool{}
	return up, down
}

// TestPSKResumption: the second dial with the same session cache resumes
// (abbreviated handshake: fewer datagrams each way, Resumed true), the
// server counts it and still knows the PSK identity; a cache whose entry
// was made with another key, or a listener without resumption, gives a
// full handshake; a fresh process reading the same cache file resumes
// too (see client/coap TestDTLSResumptionAcrossProcesses for the file).
func TestPSKResumption(t *testing.T) {
	psk := map[string][]byte{"dev1": []byte("secret1")}
	l, err := Listen("127.0.0.1:0", Config{PSK: psk, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cache := &MemorySessionCache{}
	proxy := newCountingProxy(t, l.LocalAddr().String())
	dial := func(key string, cache SessionCache) (*ClientConn, int, int) {
		t.Helper()
		proxy.reset()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, proxy.addr(), ClientConfig{Identity: "dev1", Key: []byte(key), Sessions: cache})
		if err != nil {
			t.Fatal(err)
		}
		// One datagram each way proves the session works and gives the
		// server's handshake goroutine time to finish its bookkeeping.
		if _, err := c.WriteTo([]byte("ping"), nil); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, from, err := l.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("%v %q", err, buf[:n])
		}
		if id := from.(Addr).Identity(); id != "dev1" {
			t.Fatalf("server sees identity %q, want dev1 (resumed=%v)", id, c.Resumed())
		}
		up, down := proxy.reset()
		return c, up, down
	}
	c1, up1, down1 := dial("secret1", cache)
	_ = c1.Close()
	if c1.Resumed() {
		t.Fatal("first dial: Resumed with an empty cache")
	}
	c2, up2, down2 := dial("secret1", cache)
	_ = c2.Close()
	t.Logf("handshake flights client->server / server->client: full %d/%d, resumed %d/%d", up1, down1, up2, down2)
	if !c2.Resumed() {
		t.Fatal("second dial with the session cache did not resume")
	}
	// Each server flight is one round trip the client waits for: full
	// (with the cookie exchange) HelloVerifyRequest, ServerHello..Done,
	// ChangeCipherSpec+Finished = 3; resumed (pion skips the cookie for a
	// known session) ServerHello+ChangeCipherSpec+Finished = 1.
	if down2 >= down1 || up2 > up1 {
		t.Fatalf("resumed handshake used %d/%d flights, full one %d/%d: want fewer server flights", up2, down2, up1, down1)
	}
	if st := l.Stats(); st.Resumed != 1 || st.Handshakes != 2 || st.Sessions < 1 {
		t.Fatalf("listener stats %+v: want 2 handshakes, 1 resumed", st)
	}
	// No cache: a full handshake.
	c3, _, _ := dial("secret1", nil)
	_ = c3.Close()
	if c3.Resumed() || l.Stats().Resumed != 1 {
		t.Fatal("a dial without a session cache resumed")
	}
	// Another key for the same identity: the stored session is not offered
	// (and the server would refuse the new key's full handshake anyway).
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer wcancel()
	if c, err := Dial(wctx, proxy.addr(), ClientConfig{Identity: "dev1", Key: []byte("wrong"), Sessions: cache}); err == nil {
		_ = c.Close()
		t.Fatal("a wrong key resumed the session of the right one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A listener without resumption issues no session IDs.
	l2, err := Listen("127.0.0.1:0", Config{PSK: psk, HandshakeTimeout: 5 * time.Second, Sessions: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for i := range 2 {
		c, err := Dial(ctx, l2.LocalAddr().String(), ClientConfig{Identity: "dev1", Key: []byte("secret1"), Sessions: cache})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if c.Resumed() {
			t.Fatalf("dial %d resumed with a listener that keeps no sessions", i)
		}
	}
}

// TestServerSessionsBoundAndExpiry: the store keeps at most max sessions
// (oldest out), a session is resumable only once bound, and not after its
// lifetime.
func TestServerSessionsBoundAndExpiry(t *testing.T) {
	s := newServerSessions(2, time.Hour)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Set([]byte(id), dtls.Session{ID: []byte(id), Secret: []byte("k" + id)}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("len %d, want 2", s.Len())
	}
	if got, _ := s.Get([]byte("b")); got.ID != nil {
		t.Fatal("an unbound session was resumable")
	}
	if r, id := s.completed([]byte("b"), "dev1"); r || id != "dev1" {
		t.Fatalf("full handshake: resumed=%v identity %q", r, id)
	}
	if r, id := s.completed([]byte("b"), ""); !r || id != "dev1" {
		t.Fatalf("resumed handshake: resumed=%v identity %q", r, id)
	}
	if got, _ := s.Get([]byte("a")); got.ID != nil {
		t.Fatal("the oldest session was not evicted")
	}
	if got, _ := s.Get([]byte("b")); string(got.Secret) != "kb" {
		t.Fatalf("bound session: %+v", got)
	}
	now = now.Add(2 * time.Hour)
	if got, _ := s.Get([]byte("b")); got.ID != nil {
		t.Fatal("an expired session was resumable")
	}
	if _, err := decodeSession([]byte{5, 1, 2}); err == nil {
		t.Fatal("a truncated stored session decoded")
	}
}

// TestResumptionFallback: a client offering a session the server no longer
// has (evicted: the store keeps one) gets a full handshake with the right
// identity, stores the new session and resumes that one next time.
func TestResumptionFallback(t *testing.T) {
	psk := map[string][]byte{"dev1": []byte("secret1"), "dev2": []byte("secret2")}
	l, err := Listen("127.0.0.1:0", Config{PSK: psk, HandshakeTimeout: 5 * time.Second, Sessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cache := &MemorySessionCache{}
	dial := func(id string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, l.LocalAddr().String(), ClientConfig{Identity: id, Key: psk[id], Sessions: cache})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.WriteTo([]byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		_, from, err := l.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got := from.(Addr).Identity(); got != id {
			t.Fatalf("server sees identity %q, want %q (resumed %v)", got, id, c.Resumed())
		}
		return c.Resumed()
	}
	for i, step := range []struct {
		id      string
		resumed bool
	}{{"dev1", false}, {"dev2", false}, {"dev1", false}, {"dev1", true}} {
		if got := dial(step.id); got != step.resumed {
			t.Fatalf("step %d (%s): resumed %v, want %v", i, step.id, got, step.resumed)
		}
	}
}
