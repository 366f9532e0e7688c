package contracttest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Relay forwards a client's traffic to a server on loopback and can then
// play a broker that goes away: Freeze drops everything from then on (in
// both directions), Vanish closes the relay's sockets. TCP relays close
// both halves of every relayed connection; UDP relays close their socket,
// so the client's datagrams reach a closed port.
type Relay struct {
	frozen atomic.Bool
	wg     sync.WaitGroup

	mu      sync.Mutex
	closers []func() error
	closed  bool
}

// StartRelay relays network ("tcp" or "udp") from a new port on 127.0.0.1
// to target. It is closed in t.Cleanup.
func StartRelay(t testing.TB, network, target string) (*Relay, string) {
	t.Helper()
	r := &Relay{}
	var addr string
	switch network {
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
		r.track(l.Close)
		addr = l.Addr().String()
		r.wg.Add(1)
		go r.acceptTCP(l, target)
	case "udp":
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
		r.track(pc.Close)
		addr = pc.LocalAddr().String()
		r.wg.Add(1)
		go r.serveUDP(pc, target)
	default:
		t.Fatalf("relay: network %q: want tcp or udp", network)
	}
	t.Cleanup(r.Vanish)
	return r, addr
}

// track registers a close function; if the relay already vanished it is
// called at once and false is returned.
func (r *Relay) track(c func() error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = c()
		return false
	}
	r.closers = append(r.closers, c)
	return true
}

// Freeze drops all traffic from now on.
func (r *Relay) Freeze() { r.frozen.Store(true) }

// Vanish closes every socket of the relay and waits for its goroutines.
// Idempotent.
func (r *Relay) Vanish() {
	r.Freeze()
	r.mu.Lock()
	cs := r.closers
	r.closers, r.closed = nil, true
	r.mu.Unlock()
	for _, c := range cs {
		_ = c()
	}
	r.wg.Wait()
}

func (r *Relay) acceptTCP(l net.Listener, target string) {
	defer r.wg.Done()
	for {
		down, err := l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			_ = down.Close()
			continue
		}
		if !r.track(down.Close) || !r.track(up.Close) {
			_ = down.Close()
			_ = up.Close()
			return
		}
		r.wg.Add(2)
		go r.pipe(down, up)
		go r.pipe(up, down)
	}
}

// pipe copies from src to dst while the relay is not frozen; when src
// ends, dst is closed too (the other pipe then ends).
func (r *Relay) pipe(src, dst net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !r.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// serveUDP relays datagrams: one upstream socket per client address.
func (r *Relay) serveUDP(pc net.PacketConn, target string) {
	defer r.wg.Done()
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return
	}
	ups := map[string]*net.UDPConn{}
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if r.frozen.Load() {
			continue
		}
		up := ups[from.String()]
		if up == nil {
			up, err = net.DialUDP("udp", nil, taddr)
			if err != nil {
				continue
			}
			if !r.track(up.Close) {
				return
			}
			ups[from.String()] = up
			r.wg.Add(1)
			go r.fromServer(pc, up, from)
		}
		_, _ = up.Write(buf[:n])
	}
}

func (r *Relay) fromServer(pc net.PacketConn, up *net.UDPConn, client net.Addr) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // ICMP errors of a connected UDP socket: keep going
		}
		if !r.frozen.Load() {
			_, _ = pc.WriteTo(buf[:n], client)
		}
	}
}
