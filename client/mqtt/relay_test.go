package mqtt_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// udpRelay stands for a NAT between one client and the broker: it takes
// the client's datagrams on one socket and sends them to the broker from
// an upstream socket; rebind moves to a fresh upstream socket (a new
// source port), as a NAT does when its mapping expired. Only answers to
// the current upstream socket go back to the client: the old mapping is
// gone, so a broker that kept sending to the old port would reach nobody.
type udpRelay struct {
	front    *net.UDPConn
	upstream *net.UDPAddr
	wg       sync.WaitGroup

	mu     sync.Mutex
	cli    *net.UDPAddr   // the client, once it sent
	cur    *net.UDPConn   // upstream socket in use
	all    []*net.UDPConn // every upstream socket, closed at cleanup
	newest *net.UDPConn   // the socket rebind opened, nil before

	sentNew, recvNew atomic.Int64 // packets on the socket rebind opened
}

func startUDPRelay(t *testing.T, upstream *net.UDPAddr) *udpRelay {
	t.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{front: front, upstream: upstream}
	r.cur = r.open(t)
	r.wg.Add(1)
	go r.fromClient()
	t.Cleanup(func() {
		_ = r.front.Close()
		r.mu.Lock()
		for _, c := range r.all {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *udpRelay) addr() string { return r.front.LocalAddr().String() }

// open opens an upstream socket and starts forwarding what it receives.
func (r *udpRelay) open(t *testing.T) *net.UDPConn {
	t.Helper()
	up, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.all = append(r.all, up)
	r.mu.Unlock()
	r.wg.Add(1)
	go r.fromBroker(up)
	return up
}

// rebind sends everything from now on from a new source port.
func (r *udpRelay) rebind(t *testing.T) {
	up := r.open(t)
	r.mu.Lock()
	r.cur, r.newest = up, up
	r.mu.Unlock()
}

func (r *udpRelay) fromClient() {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.front.ReadFromUDP(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.cli = from
		up, isNew := r.cur, r.cur == r.newest
		r.mu.Unlock()
		if isNew {
			r.sentNew.Add(1)
		}
		_, _ = up.WriteToUDP(buf[:n], r.upstream)
	}
}

func (r *udpRelay) fromBroker(up *net.UDPConn) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, _, err := up.ReadFromUDP(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		cli, isNew, current := r.cli, up == r.newest, up == r.cur
		r.mu.Unlock()
		if isNew {
			r.recvNew.Add(1)
		}
		if cli != nil && current {
			_, _ = r.front.WriteToUDP(buf[:n], cli)
		}
	}
}

// tcpRelay forwards one client's TCP connection to the broker; rebind
// drops the upstream connection and carries on from a new one (a new
// source port), which is all a NAT can do for TCP.
type tcpRelay struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	mu  sync.Mutex
	cli net.Conn
	up  net.Conn
	all []net.Conn
}

func startTCPRelay(t *testing.T, upstream string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, upstream: upstream}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range r.all {
			_ = c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *tcpRelay) track(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, c)
}

func (r *tcpRelay) accept() {
	defer r.wg.Done()
	cli, err := r.ln.Accept()
	if err != nil {
		return
	}
	r.track(cli)
	up, err := net.Dial("tcp4", r.upstream)
	if err != nil {
		_ = cli.Close()
		return
	}
	r.track(up)
	r.mu.Lock()
	r.cli, r.up = cli, up
	r.mu.Unlock()
	r.wg.Add(2)
	go r.toClient(up)
	go func() { // client to whichever upstream is current
		defer r.wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := cli.Read(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			up := r.up
			r.mu.Unlock()
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
}

// toClient copies up to the client; when the current upstream ends, so
// does the client's connection (the relay has nothing to answer with).
func (r *tcpRelay) toClient(up net.Conn) {
	defer r.wg.Done()
	r.mu.Lock()
	cli := r.cli
	r.mu.Unlock()
	_, _ = io.Copy(cli, up)
	r.mu.Lock()
	current := r.up == up
	r.mu.Unlock()
	if current {
		_ = cli.Close()
	}
}

// rebind closes the upstream connection and opens a new one.
func (r *tcpRelay) rebind() {
	up, err := net.Dial("tcp4", r.upstream)
	if err != nil {
		return
	}
	r.track(up)
	r.mu.Lock()
	old := r.up
	r.up = up
	r.mu.Unlock()
	_ = old.Close()
	r.wg.Add(1)
	go r.toClient(up)
}

func udpAddrOf(t *testing.T, srv *broker.Server, scheme string) *net.UDPAddr {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp4", hostPort(t, srv, scheme))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tcpAddrOf(t *testing.T, srv *broker.Server) string { return hostPort(t, srv, "mqtt") }

func hostPort(t *testing.T, srv *broker.Server, scheme string) string {
	t.Helper()
	u := brokertest.Endpoint(t, srv, scheme)
	return strings.TrimSuffix(strings.TrimPrefix(u, scheme+"://"), "/")
}
