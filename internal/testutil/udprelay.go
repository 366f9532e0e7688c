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
//
// A client is one QUIC connection, not one address: the kernel may give a
// new connection the port its predecessor closed, so a QUIC Initial from a
// known address with a destination connection ID that a client may choose
// for a new connection (at least 8 bytes, RFC 9000 section 7.2) and that
// neither that connection nor the server's answers used starts a new
// client.
type UDPRelay struct {
	ln     *net.UDPConn
	target *net.UDPAddr
	delay  time.Duration
	wg     sync.WaitGroup

	mu    sync.Mutex
	flows map[string]*relayFlow // by client address: its current connection
	all   []*relayFlow          // every flow, to close
	sent  [][][]byte            // per client in order of first datagram, the datagrams in order
}

// relayFlow is one client connection through the relay.
type relayFlow struct {
	up    *net.UDPConn
	index int
	cids  map[string]bool // connection IDs of this connection (client DCIDs, server SCIDs)
}

// NewUDPRelay starts a relay to target whose answers are delayed by delay.
func NewUDPRelay(t testing.TB, target *net.UDPAddr, delay time.Duration) *UDPRelay {
	t.Helper()
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &UDPRelay{ln: ln, target: target, delay: delay, flows: map[string]*relayFlow{}}
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
		f := r.flows[k]
		dcid, initial := quicInitialDCID(buf[:n])
		if f == nil || (initial && len(dcid) >= 8 && !f.cids[string(dcid)]) {
			up, err := net.DialUDP("udp", nil, r.target)
			if err != nil {
				r.mu.Unlock()
				continue
			}
			f = &relayFlow{up: up, index: len(r.sent), cids: map[string]bool{}}
			r.flows[k] = f
			r.all = append(r.all, f)
			r.sent = append(r.sent, nil)
			r.wg.Add(1)
			go r.back(f, from)
		}
		if initial {
			f.cids[string(dcid)] = true
		}
		r.sent[f.index] = append(r.sent[f.index], append([]byte(nil), buf[:n]...))
		r.mu.Unlock()
		_, _ = f.up.Write(buf[:n])
	}
}

// back relays the server's datagrams to the client, each delay later, and
// notes the connection IDs the server chose.
func (r *UDPRelay) back(f *relayFlow, client *net.UDPAddr) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := f.up.Read(buf)
		if err != nil {
			return
		}
		if scid, ok := quicLongSCID(buf[:n]); ok {
			r.mu.Lock()
			f.cids[string(scid)] = true
			r.mu.Unlock()
		}
		d := append([]byte(nil), buf[:n]...)
		r.wg.Add(1)
		time.AfterFunc(r.delay, func() {
			defer r.wg.Done()
			_, _ = r.ln.WriteToUDP(d, client)
		})
	}
}

// quicLongIDs parses the connection IDs of a QUIC long-header packet
// (RFC 9000 section 17.2): form bit set, 4-byte version, DCID and SCID,
// each behind a length byte.
func quicLongIDs(p []byte) (dcid, scid []byte, ok bool) {
	if len(p) < 7 || p[0]&0x80 == 0 {
		return nil, nil, false
	}
	i := 5
	dl := int(p[i])
	i++
	if dl > 20 || len(p) < i+dl+1 {
		return nil, nil, false
	}
	dcid = p[i : i+dl]
	i += dl
	sl := int(p[i])
	i++
	if sl > 20 || len(p) < i+sl {
		return nil, nil, false
	}
	return dcid, p[i : i+sl], true
}

// quicInitialDCID returns the destination connection ID of a datagram
// that starts with a QUIC version 1 Initial packet.
func quicInitialDCID(p []byte) ([]byte, bool) {
	dcid, _, ok := quicLongIDs(p)
	if !ok || p[0]&0x30 != 0 { // long packet type 0: Initial (QUIC v1)
		return nil, false
	}
	return dcid, true
}

// quicLongSCID returns the source connection ID of a long-header packet.
func quicLongSCID(p []byte) ([]byte, bool) {
	_, scid, ok := quicLongIDs(p)
	return scid, ok
}

func (r *UDPRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, f := range r.all {
		_ = f.up.Close()
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
