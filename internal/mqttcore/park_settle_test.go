// SPDX-License-Identifier: MIT

//go:build linux

package mqttcore

// Tests of patch 39: a new connection's CONNECT is answered only after
// the parked clients have handled the input already at their sockets.

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"
)

// TestSettleHandlesParkedInput parks a subscriber, writes an UNSUBSCRIBE
// to its socket and settles at once: when settle returns true the
// subscription must be gone, however the poller and the scheduler raced.
func TestSettleHandlesParkedInput(t *testing.T) {
	cc := NewDefaultServerCapabilities()
	s := New(&Options{Logger: logger, Capabilities: cc, ParkIdleAfter: 5 * time.Millisecond})
	_ = s.AddHook(new(AllowHook), nil)
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served sync.WaitGroup
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go s.ServeConnection("t", c, func(error) { _ = c.Close(); served.Done() })
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = ln.Close()
		served.Wait()
		_ = s.Close()
	})
	r := bufio.NewReader(c)
	// CONNECT 3.1.1, clean session, keep-alive 0, client id "p".
	send(t, c, []byte{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 0, 0, 1, 'p'})
	expect(t, r, 0x20)
	cl := waitClient(t, s, "p")
	for i := range 50 {
		id := byte(i + 1)
		// SUBSCRIBE id, "g" QoS 0.
		send(t, c, []byte{0x82, 6, 0, id, 0, 1, 'g', 0})
		expect(t, r, 0x90)
		deadline := time.Now().Add(waitTimeout)
		for cl.park.state.Load() != parkParked {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: client not parked within %v", i, waitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		// UNSUBSCRIBE id, "g".
		send(t, c, []byte{0xa2, 5, 0, id, 0, 1, 'g'})
		if !s.poller.settle(waitTimeout) {
			t.Fatalf("round %d: settle gave up after %v", i, waitTimeout)
		}
		if subs := s.Topics.Subscribers("g"); len(subs.Subscriptions) != 0 {
			t.Fatalf("round %d: settle returned before the parked client's UNSUBSCRIBE was handled", i)
		}
		expect(t, r, 0xb0)
	}
}

func send(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// expect reads one packet with a one-byte remaining length and checks
// its type byte.
func expect(t *testing.T, r *bufio.Reader, typ byte) {
	t.Helper()
	var h [2]byte
	if _, err := r.Read(h[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(h[1:]); err != nil {
		t.Fatal(err)
	}
	if h[0]&0xf0 != typ {
		t.Fatalf("got packet type %#x, want %#x", h[0], typ)
	}
	if _, err := r.Discard(int(h[1])); err != nil {
		t.Fatal(err)
	}
}
