package testutil

import (
	"net"
	"testing"
	"time"
)

// quicLong builds a QUIC v1 long-header packet of type typ (0 Initial,
// 1 0-RTT, 2 Handshake) with the given connection IDs and some payload.
func quicLong(typ byte, dcid, scid string) []byte {
	p := []byte{0xC0 | typ<<4, 0, 0, 0, 1, byte(len(dcid))}
	p = append(p, dcid...)
	p = append(p, byte(len(scid)))
	p = append(p, scid...)
	return append(p, "payload"...)
}

// TestUDPRelayNewConnectionOnReusedPort: datagrams of one QUIC connection
// (its Initials with the client's DCID, then with the ID the server chose,
// a Handshake packet) are one client; a new Initial from the same port
// (the kernel reused the closed connection's port) is the next client.
func TestUDPRelayNewConnectionOnReusedPort(t *testing.T) {
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		// The server answers every datagram with a Handshake packet
		// whose source connection ID is "srvcid0123".
		buf := make([]byte, 2048)
		for {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP(quicLong(2, "cli", "srvcid0123"), from)
		}
	}()
	relay := NewUDPRelay(t, srv.LocalAddr().(*net.UDPAddr), time.Millisecond)
	c, err := net.Dial("udp", relay.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange := func(p []byte) {
		t.Helper()
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 2048)); err != nil {
			t.Fatalf("no answer through the relay: %v", err)
		}
	}
	exchange(quicLong(0, "firstdcid", "cli"))
	exchange(quicLong(0, "srvcid0123", "cli")) // the client's next Initial uses the server's ID
	exchange(quicLong(2, "srvcid0123", "cli"))
	exchange([]byte{0x40, 1, 2, 3}) // a short-header packet
	if got := len(relay.Sent(0)); got != 4 || relay.Sent(1) != nil {
		t.Fatalf("one connection: client 0 sent %d datagrams, client 1 %v", got, relay.Sent(1))
	}
	exchange(quicLong(0, "otherdcid", "cli2")) // a new connection from the same port
	exchange(quicLong(1, "otherdcid", "cli2")) // its 0-RTT
	if len(relay.Sent(0)) != 4 || len(relay.Sent(1)) != 2 {
		t.Fatalf("after a new Initial: client 0 %d datagrams, client 1 %d, want 4 and 2", len(relay.Sent(0)), len(relay.Sent(1)))
	}
}
