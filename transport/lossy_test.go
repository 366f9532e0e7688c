package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// lossyProxy forwards UDP datagrams between clients and target on
// loopback, dropping each with probability loss and delaying each by delay.
// It exists so QUIC recovery paths (lost handshake packets, lost FINs, lost
// 0-RTT) run in tests without root or netem.
type lossyProxy struct {
	pc     *net.UDPConn
	target *net.UDPAddr
	loss   float64
	delay  time.Duration
	jitter time.Duration // uniform extra delay in [0, jitter): reorders

	mu       sync.Mutex
	rng      *rand.Rand
	up       map[string]*net.UDPConn // client address -> upstream socket
	dropped  int
	forwared int
	closed   bool
	wg       sync.WaitGroup
}

func newLossyProxy(t *testing.T, target net.Addr, loss float64, delay time.Duration, seed uint64) *lossyProxy {
	return newLossyProxyTB(t, target, loss, delay, seed)
}

func newLossyProxyTB(t testing.TB, target net.Addr, loss float64, delay time.Duration, seed uint64) *lossyProxy {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{
		pc: pc, target: target.(*net.UDPAddr), loss: loss, delay: delay,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), up: map[string]*net.UDPConn{},
	}
	p.wg.Add(1)
	go p.fromClients()
	t.Cleanup(p.close)
	return p
}

func (p *lossyProxy) addr() string { return p.pc.LocalAddr().String() }

// send forwards b through write unless the dice drop it.
func (p *lossyProxy) send(b []byte, write func([]byte)) {
	p.mu.Lock()
	drop := p.rng.Float64() < p.loss
	d := p.delay
	if p.jitter > 0 {
		d += time.Duration(p.rng.Int64N(int64(p.jitter)))
	}
	if drop {
		p.dropped++
	} else {
		p.forwared++
	}
	closed := p.closed
	p.mu.Unlock()
	if drop || closed {
		return
	}
	b = bytes.Clone(b)
	if d <= 0 {
		write(b)
		return
	}
	p.wg.Add(1)
	time.AfterFunc(d, func() {
		defer p.wg.Done()
		write(b)
	})
}

func (p *lossyProxy) fromClients() {
	defer p.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := p.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		up, ok := p.up[from.String()]
		if !ok {
			up, err = net.DialUDP("udp", nil, p.target)
			if err != nil {
				p.mu.Unlock()
				continue
			}
			p.up[from.String()] = up
			p.wg.Add(1)
			go p.fromServer(up, from)
		}
		p.mu.Unlock()
		p.send(buf[:n], func(b []byte) { _, _ = up.Write(b) })
	}
}

func (p *lossyProxy) fromServer(up *net.UDPConn, client *net.UDPAddr) {
	defer p.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		p.send(buf[:n], func(b []byte) { _, _ = p.pc.WriteToUDP(b, client) })
	}
}

func (p *lossyProxy) close() {
	p.mu.Lock()
	p.closed = true
	ups := p.up
	p.up = nil
	p.mu.Unlock()
	p.pc.Close()
	for _, u := range ups {
		u.Close()
	}
	p.wg.Wait()
}

func (p *lossyProxy) stats() (fwd, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwared, p.dropped
}

// TestQUICUnderLoss: with 10 % loss each way and 5 ms delay, a payload
// written and closed at once arrives complete, both ways, and 0-RTT (used
// or rejected) still delivers.
func TestQUICUnderLoss(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srv})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	proxy := newLossyProxy(t, l.Addr(), 0.10, 5*time.Millisecond, 1)
	url := "quic://" + proxy.addr()
	payload := bytes.Repeat([]byte("lossy-"), 40_000) // 240 kB
	cacheFile := filepath.Join(t.TempDir(), "c.json")

	for i := range 3 { // 1: full handshake; 2, 3: 0-RTT attempts under loss
		cache, err := NewFileSessionCache(cacheFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := Dial(ctx, url, DialOptions{TLSConfig: cli, SessionCache: cache})
		cancel()
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		errc := make(chan error, 1)
		go func() {
			_, err := c.Write(payload)
			errc <- err
		}()
		got := make([]byte, len(payload))
		if n, err := io.ReadFull(c, got); err != nil {
			st, _ := c.QUICStats()
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("conn %d: read after %d bytes: %v; info %+v; stats %+v\n%s", i, n, err, c.Info(), st, buf)
		}
		if err := <-errc; err != nil {
			t.Fatalf("conn %d: write: %v", i, err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("conn %d: echo differs", i)
		}
		info := c.Info()
		t.Logf("conn %d: used_0rtt=%v rejected_0rtt=%v resumed=%v", i, info.Used0RTT, info.Rejected0RTT, info.TLSResumed)
		c.Close()
		cache.Close()
		if i == 0 {
			waitTicket(t, cacheFile)
		}
	}
	fwd, dropped := proxy.stats()
	if dropped == 0 {
		t.Fatalf("proxy dropped nothing (%d forwarded): the test did not test loss", fwd)
	}
	t.Logf("proxy forwarded %d, dropped %d datagrams", fwd, dropped)
}

// TestQUICCloseUnderLossDeliversTail: the server writes and closes at once;
// under loss the client still reads every byte before EOF.
func TestQUICCloseUnderLossDeliversTail(t *testing.T) {
	noLeak(t)
	srv, cli := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	payload := bytes.Repeat([]byte{0x5a}, 500_000)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := l.Accept(ctx)
		if err != nil {
			done <- err
			return
		}
		_, err = c.Write(payload)
		c.Close()
		done <- err
	}()
	proxy := newLossyProxy(t, l.Addr(), 0.10, 5*time.Millisecond, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "quic://"+proxy.addr(), DialOptions{TLSConfig: cli})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("go")); err != nil { // opens the stream on the server
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if n != int64(len(payload)) {
		t.Fatalf("client read %d bytes, want %d", n, len(payload))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQUIC0RTTRejectedUnderLoss: the fallback after a rejection re-sends
// early data correctly when packets are lost as well.
func TestQUIC0RTTRejectedUnderLoss(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	srv, cli := serverTLS(t, dir)
	l := quicEcho(t, "127.0.0.1:0", srv, QUICOptions{})
	addr := l.Endpoint().Address()
	proxy := newLossyProxy(t, l.Addr(), 0.15, 5*time.Millisecond, 3)
	url := "quic://" + proxy.addr()
	cli = &tls.Config{RootCAs: cli.RootCAs, ServerName: "127.0.0.1"}
	cacheFile := filepath.Join(t.TempDir(), "c.json")
	dialEcho(t, url, cli, cacheFile, QUICOptions{})
	waitTicket(t, cacheFile)
	l.Close()
	// Restart on the same port without persisted ticket keys: every old
	// ticket is rejected.
	srv2 := srv.Clone()
	srv2.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
	quicEcho(t, addr, srv2, QUICOptions{})
	// dialEcho writes right after Dial (early) and reads the echo.
	info := dialEcho(t, url, cli, cacheFile, QUICOptions{})
	if info.Used0RTT || !info.Rejected0RTT {
		t.Fatalf("foreign ticket: %+v, want Rejected0RTT and not Used0RTT", info)
	}
}
