package link

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRebindUDP: a client in a sends to a server in b every 5 ms across a
// Rebind step at 200 ms. The server sees the client's source port change
// exactly once, to another port; its replies to the new port reach the
// client's socket, and replies to the old port are dropped as "nat".
func TestRebindUDP(t *testing.T) {
	const rebindAt = 200 * time.Millisecond
	n := up(t, twoNodes(Params{Schedule: []Step{{At: rebindAt, Rebind: true}}}, Params{}), Options{})
	start := time.Now() // the schedule started just before up returned
	var pc net.PacketConn
	if err := n.Do("b", func() (err error) { pc, err = net.ListenPacket("udp4", ":7200"); return }); err != nil {
		t.Fatal(err)
	}
	const stale = 5 // replies the server sends to the old port
	var mu sync.Mutex
	var ports []uint16 // the client's source ports, in order of change
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			src := from.(*net.UDPAddr).AddrPort()
			mu.Lock()
			if len(ports) == 0 || ports[len(ports)-1] != src.Port() {
				ports = append(ports, src.Port())
				if len(ports) == 2 { // the rebinding: answer the old mapping too
					old := net.UDPAddrFromAddrPort(netip.AddrPortFrom(src.Addr(), ports[0]))
					for range stale {
						_, _ = pc.WriteTo([]byte("stale"), old)
					}
				}
			}
			mu.Unlock()
			_, _ = pc.WriteTo(buf[:k], from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	c := dialUDP(t, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7200))
	var got, staleGot, lateGot int // echoes, stale replies, echoes of datagrams sent after the step
	var lastSent uint64
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		buf := make([]byte, 2048)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			switch {
			case string(buf[:k]) == "stale":
				staleGot++
			case k == 16:
				got++
				if time.Duration(binary.BigEndian.Uint64(buf[8:])) > rebindAt+20*time.Millisecond {
					lateGot++
				}
			}
		}
	}()
	if time.Since(start) >= rebindAt-50*time.Millisecond {
		t.Fatalf("ready to send only at %v, too close to the rebinding at %v (host overloaded?)", time.Since(start), rebindAt)
	}
	msg := make([]byte, 16)
	for i := uint64(0); time.Since(start) < rebindAt+400*time.Millisecond; i++ {
		binary.BigEndian.PutUint64(msg, i)
		binary.BigEndian.PutUint64(msg[8:], uint64(time.Since(start)))
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("write: %v", err)
		}
		lastSent = i
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	c.SetReadDeadline(time.Now())
	<-rdone
	ab, ba := statsOf(t, n, "ab", "a->b"), statsOf(t, n, "ab", "b->a")
	mu.Lock()
	defer mu.Unlock()
	t.Logf("sent %d, echoes %d (%d of datagrams sent after the step), stale replies received %d; source ports %v; b->a nat drops %d",
		lastSent+1, got, lateGot, staleGot, ports, ba.DropNAT)
	if len(ports) != 2 || ports[1] == ports[0] {
		t.Fatalf("source ports seen by the server %v: want the client's port, then one other", ports)
	}
	if lateGot == 0 {
		t.Error("no echo of a datagram sent after the rebinding reached the client")
	}
	if staleGot != 0 {
		t.Errorf("%d replies to the old port reached the client", staleGot)
	}
	if ba.DropNAT < stale || ba.Drops() != ba.DropNAT {
		t.Errorf("b->a drops: nat %d, all %d; want at least %d, all of them nat", ba.DropNAT, ba.Drops(), stale)
	}
	if ab.DropNAT != 0 {
		t.Errorf("a->b: %d nat drops", ab.DropNAT)
	}
}

// TestRebindTCP: a connection from a to b made before a Rebind step dies
// on the client's first write after it (b resets the unknown 4-tuple, the
// NAT hands the reset to the client); a new connection works.
func TestRebindTCP(t *testing.T) {
	const rebindAt = time.Second
	n := up(t, twoNodes(Params{Schedule: []Step{{At: rebindAt, Rebind: true}}}, Params{}), Options{})
	start := time.Now()
	var ln net.Listener
	if err := n.Do("b", func() (err error) { ln, err = net.Listen("tcp4", ":7300"); return }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() { // echo server
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(c, c) }()
		}
	}()
	server := netip.AddrPortFrom(n.AddrOn("b", "ab"), 7300).String()
	dial := func() net.Conn {
		t.Helper()
		var c net.Conn
		if err := n.Do("a", func() (err error) { c, err = net.DialTimeout("tcp4", server, 5*time.Second); return }); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		return err
	}
	old := dial()
	if err := echo(old); err != nil {
		t.Fatalf("echo before the rebinding: %v", err)
	}
	if time.Since(start) >= rebindAt-100*time.Millisecond {
		t.Fatalf("the connection took until %v, too close to the rebinding at %v (host overloaded?)", time.Since(start), rebindAt)
	}
	time.Sleep(rebindAt + 100*time.Millisecond - time.Since(start))
	t0 := time.Now()
	err := echo(old)
	if err == nil {
		err = echo(old) // the reset may come after the first write's echo was read
	}
	took := time.Since(t0)
	t.Logf("old connection after the rebinding: %v after %v; b->a nat drops %d", err, took, statsOf(t, n, "ab", "b->a").DropNAT)
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("old connection after the rebinding: %v, want connection reset or broken pipe", err)
	}
	if took > 3*time.Second {
		t.Errorf("the old connection took %v to fail", took)
	}
	if err := echo(dial()); err != nil {
		t.Fatalf("new connection after the rebinding: %v", err)
	}
}
