package testutil

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// UDPRelay relays UDP datagrams between clients and one server on
// loopback, delays every answer of the server by a fixed time (as a real
// path would, so a QUIC client's first flight surely leaves as 0-RTT data
// before the handshake answer arrives), and records what each client
// sent, so a test can replay a first flight as an on-path attacker would.
// It stops when the test ends.
type UDPRelay struct {
	ln     *net.UDPConn
	target *net.UDPAddr
	delay  time.Duration
	wg     sync.WaitGroup

	mu    sync.Mutex
	ups   map[string]*net.UDPConn
	index map[string]int
	sent  [][][]byte // per client in order of first datagram, the datagrams in order
}

// NewUDPRelay starts a relay to target whose answers are delayed by delay.
func NewUDPRelay(t testing.TB, target *net.UDPAddr, delay time.Duration) *UDPRelay {
	t.Helper()
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &UDPRelay{ln: ln, target: target, delay: delay, ups: map[string]*net.UDPConn{}, index: map[string]int{}}
	r.wg.Add(1)
	go r.loop()
	t.Cleanup(r.close)
	return r
}

// Addr is the relay's address (HOST:PORT) for the clients.
func (r *UDPRelay) Addr() string { return r.ln.LocalAddr().String() }

// Sent returns a copy of the datagrams the i-th client (in order of its
// first datagram) sent; nil if there is no such client.
func (r *UDPRelay) Sent(i int) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.sent) {
		return nil
	}
	return append([][]byte(nil), r.sent[i]...)
}

func (r *UDPRelay) loop() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.ln.ReadFromUDP(buf)
		if err != nil {
			return
		}
		k := from.String()
		r.mu.Lock()
		up := r.ups[k]
		if up == nil {
			if up, err = net.DialUDP("udp", nil, r.target); err != nil {
				r.mu.Unlock()
				continue
			}
			r.ups[k] = up
			r.index[k] = len(r.sent)
			r.sent = append(r.sent, nil)
			r.wg.Add(1)
			go r.back(up, from)
		}
		i := r.index[k]
		r.sent[i] = append(r.sent[i], append([]byte(nil), buf[:n]...))
		r.mu.Unlock()
		_, _ = up.Write(buf[:n])
	}
}

// back relays the server's datagrams to the client, each delay later.
func (r *UDPRelay) back(up *net.UDPConn, client *net.UDPAddr) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		d := append([]byte(nil), buf[:n]...)
		r.wg.Add(1)
		time.AfterFunc(r.delay, func() {
			defer r.wg.Done()
			_, _ = r.ln.WriteToUDP(d, client)
		})
	}
}

func (r *UDPRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, up := range r.ups {
		_ = up.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// ReplayUDP sends recorded datagrams to target from a new port, 1 ms
// apart, as an attacker replaying a captured first flight would. The
// socket stays open (answers are read and dropped) until the test ends.
func ReplayUDP(t testing.TB, target *net.UDPAddr, dgrams [][]byte) {
	t.Helper()
	c, err := net.DialUDP("udp", nil, target)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil && errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = c.Close(); <-done })
	for _, d := range dgrams {
		if _, err := c.Write(d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}
