// SPDX-License-Identifier: MIT

package mqttcore

import (
	"bytes"
	"io"
	"testing"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// The client's QoS 2 exchanges and the server's messages use separate
// packet identifier spaces (MQTT 3.1.1 section 2.3.1, 5.0 section
// 2.2.1): one of each under the same identifier must not disturb the
// other. [iotq patch 56]

func TestInflightKeepsTheClientsExchangesApart(t *testing.T) {
	in := NewInflights()
	in.Set(packets.Packet{PacketID: 7, FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 2}, Payload: []byte("server's")})
	if !in.SetInbound(packets.Packet{PacketID: 7, FixedHeader: packets.FixedHeader{Type: packets.Pubrec}}) {
		t.Fatal("SetInbound of a new exchange returned false")
	}
	if in.SetInbound(packets.Packet{PacketID: 7, FixedHeader: packets.FixedHeader{Type: packets.Pubrec}}) {
		t.Fatal("SetInbound of an open exchange returned true")
	}
	if pk, ok := in.Get(7); !ok || pk.FixedHeader.Type != packets.Publish || string(pk.Payload) != "server's" {
		t.Fatalf("the server's message under 7: %v %v", pk.FixedHeader, ok)
	}
	if in.Len() != 1 || in.InboundLen() != 1 {
		t.Fatalf("Len %d, InboundLen %d; want 1 and 1", in.Len(), in.InboundLen())
	}

	c := in.Clone()
	if !in.Delete(7) || !in.HasInbound(7) {
		t.Fatal("deleting the server's message ended the client's exchange")
	}
	if _, ok := in.TakeInbound(7); !ok || in.HasInbound(7) {
		t.Fatal("TakeInbound did not end the client's exchange")
	}
	if _, ok := c.Get(7); !ok || !c.HasInbound(7) {
		t.Fatal("Clone lost one of the two records, or shares them with the original")
	}
}

// TestAcksFindTheirOwnExchange: with the server's QoS 2 message and the
// client's open QoS 2 exchange under one identifier, the client's PUBREC
// moves the server's message on (PUBREL), and the client's PUBREL ends its
// own exchange (PUBCOMP) and leaves the server's message in flight.
func TestAcksFindTheirOwnExchange(t *testing.T) {
	const id = 7
	s := newServer()
	cl, r, w := newTestClient()
	cl.Properties.ProtocolVersion = 5
	cl.State.Inflight.Set(packets.Packet{PacketID: id, FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 2}})
	cl.State.Inflight.SetInbound(packets.Packet{PacketID: id, FixedHeader: packets.FixedHeader{Type: packets.Pubrec}})

	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if err := s.processPacket(cl, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrec}, PacketID: id, ProtocolVersion: 5}); err != nil {
		t.Fatal(err)
	}
	if pk, ok := cl.State.Inflight.Get(id); !ok || pk.FixedHeader.Type != packets.Pubrel {
		t.Fatalf("after the client's PUBREC the server's record is %v (%v); want its PUBREL", pk.FixedHeader, ok)
	}
	if !cl.State.Inflight.HasInbound(id) {
		t.Fatal("the client's PUBREC for the server's message ended the client's own exchange")
	}
	if err := s.processPacket(cl, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: id, ProtocolVersion: 5}); err != nil {
		t.Fatal(err)
	}
	if cl.State.Inflight.HasInbound(id) {
		t.Fatal("the client's PUBREL left its exchange open")
	}
	if _, ok := cl.State.Inflight.Get(id); !ok {
		t.Fatal("the client's PUBREL for its own exchange removed the server's message")
	}
	_ = w.Close()
	// PUBREL (type 6) then PUBCOMP (type 7), both success (no reason code
	// byte or 0x00).
	b := <-got
	want := []byte{0x62, 2, 0, id, 0x70, 2, 0, id}
	if string(b) != string(want) {
		t.Fatalf("server wrote % x, want % x", b, want)
	}
}

// TestQueuedMessageGoneFromSessionIsNotWritten: a QoS 1 message that left
// the session while it waited in the outbound queue (the expiry sweep
// removed it) is not written: its packet identifier is free, and the
// client's PUBACK for it would complete the next message given the
// identifier. The one still in the session is written and marked sent
// (DUP 1 for a resend). [iotq patch 59]
func TestQueuedMessageGoneFromSessionIsNotWritten(t *testing.T) {
	cl, r, w := newTestClient()
	cl.Properties.ProtocolVersion = 4
	gone := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "t", PacketID: 1, Payload: []byte("gone")}
	kept := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "t", PacketID: 2, Payload: []byte("kept")}
	cl.State.Inflight.SetSeq(&gone)
	cl.State.Inflight.SetSeq(&kept)
	cl.State.outbound.push(&gone)
	cl.State.outbound.push(&kept)
	cl.State.Inflight.Delete(gone.PacketID)

	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	cl.WriteLoop()
	_ = w.Close()
	b := <-got
	if bytes.Contains(b, []byte("gone")) || !bytes.Contains(b, []byte("kept")) {
		t.Fatalf("the writer wrote % x: want \"kept\" only", b)
	}
	if pk, ok := cl.State.Inflight.Get(kept.PacketID); !ok || !pk.FixedHeader.Dup {
		t.Fatalf("the written message's session record: DUP %v (present %v), want DUP 1", pk.FixedHeader.Dup, ok)
	}
}

// A client's QoS 2 exchange that the connection being taken over completes
// after the new connection copied the session, and before the exchanges
// moved over, is not left open on the new connection: the client's next
// QoS 2 PUBLISH under that identifier is a new message [MQTT-4.3.3-9].
// [iotq patch 62]
func TestTakeoverLeavesNoCompletedExchangeOpen(t *testing.T) {
	s := newServer()
	prev, _, _ := newTestClient()
	prev.ID = "overlap"
	prev.Net.Conn = nil // gone: nothing reads the takeover's DISCONNECT
	prev.Properties.ProtocolVersion = 5
	prev.Properties.Props.SessionExpiryInterval = 60
	prev.State.Inflight.SetInbound(packets.Packet{PacketID: 9, FixedHeader: packets.FixedHeader{Type: packets.Pubrec}})
	prev.State.Inflight.SetInbound(packets.Packet{PacketID: 10, FixedHeader: packets.FixedHeader{Type: packets.Pubrec}})
	s.Clients.Add(prev)

	cl, _, _ := newTestClient()
	cl.ID = "overlap"
	cl.Properties.ProtocolVersion = 5
	if !s.inheritClientSession(packets.Packet{Connect: packets.ConnectParams{ClientIdentifier: "overlap"}}, cl) {
		t.Fatal("the session was not inherited")
	}
	if _, ok := prev.State.Inflight.TakeInbound(9); !ok { // prev's reader handles the PUBREL
		t.Fatal("the exchange left the previous connection on takeover")
	}
	s.moveInflights(prev, cl)
	if cl.State.Inflight.HasInbound(9) {
		t.Fatal("the exchange completed on the previous connection is still open on the new one")
	}
	if !cl.State.Inflight.HasInbound(10) {
		t.Fatal("the exchange still open did not move to the new connection")
	}
}
