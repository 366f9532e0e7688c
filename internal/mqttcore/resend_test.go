// SPDX-License-Identifier: MIT

package mqttcore

import (
	"io"
	"sync/atomic"
	"testing"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// A reconnecting client is resent what its session held when its
// connection took the session over (patch 48): a delivery routed to the
// connection afterwards is queued by its publisher and must not go out a
// second time under the same packet identifier, and an identifier the
// session freed and gave to a new message names that message, not the one
// to resend.
func TestResendSendsWhatTheSessionHeld(t *testing.T) {
	cl, r, w := newTestClient()
	cl.Properties.ProtocolVersion = 4
	publish := func(id uint16, payload string) packets.Packet {
		pk := packets.Packet{
			FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
			TopicName:   "t",
			PacketID:    id,
			Payload:     []byte(payload),
		}
		if !cl.State.Inflight.SetSeq(&pk) {
			t.Fatalf("packet id %d already in flight", id)
		}
		return pk
	}
	publish(1, "held-1")
	publish(2, "held-2")
	inherited := cl.State.Inflight.refs() // the session as taken over
	publish(3, "delivered-after")         // routed to the connection since: queued, not resent
	if !cl.State.Inflight.Delete(2) {     // held-2 acknowledged (on the previous connection) ...
		t.Fatal("held-2 not in flight")
	}
	publish(2, "new-under-2") // ... and its identifier given to a new message

	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if err := cl.resend(inherited); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	b := <-got

	var payloads []string
	for len(b) > 0 {
		n := int(b[1]) // remaining length: one byte for these small packets
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Remaining: n}, ProtocolVersion: 4}
		if err := pk.PublishDecode(b[2 : 2+n]); err != nil {
			t.Fatalf("decode: %v (bytes %x)", err, b)
		}
		payloads = append(payloads, string(pk.Payload))
		b = b[2+n:]
	}
	if len(payloads) != 1 || payloads[0] != "held-1" {
		t.Fatalf("resent %q, want only [held-1]: a message the session did not hold when the connection took it over went out (again)", payloads)
	}
	for _, id := range []uint16{1, 2, 3} {
		if _, ok := cl.State.Inflight.Get(id); !ok {
			t.Fatalf("packet id %d left the session by the resend", id)
		}
	}
}

// An acknowledgement the client sent on the connection its session left
// (read after the takeover) leaves the new connection's copy of the message
// in flight (patch 48): the new connection has resent it under the same
// packet identifier, and until the client acknowledges it there, that
// identifier must not name another message.
func TestAckOnTakenOverConnectionLeavesTheSuccessorsCopy(t *testing.T) {
	s := newServer()
	prev, _, _ := newTestClient()
	cur, _, _ := newTestClient()
	prev.ID, cur.ID = "sub", "sub"
	pk := packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
		TopicName:   "t",
		PacketID:    22,
		Payload:     []byte("x"),
		Created:     1,
	}
	prev.State.Inflight.Set(pk)
	cur.State.Inflight.Set(pk) // the clone
	atomic.StoreInt64(&s.Info.Inflight, 1)
	prev.State.isTakenOver.Store(true)
	s.Clients.Add(cur)

	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: 22}
	if err := s.processPuback(prev, ack); err != nil {
		t.Fatal(err)
	}
	if _, ok := prev.State.Inflight.Get(22); ok {
		t.Fatal("the taken-over connection kept its copy")
	}
	if _, ok := cur.State.Inflight.Get(22); !ok {
		t.Fatal("the old connection's PUBACK removed the new connection's copy: packet id 22 is free there while the client may still acknowledge the resent copy")
	}
	if n := atomic.LoadInt64(&s.Info.Inflight); n != 1 {
		t.Fatalf("Info.Inflight %d, want 1: the message is still in the session", n)
	}
	if err := s.processPuback(cur, ack); err != nil {
		t.Fatal(err)
	}
	if _, ok := cur.State.Inflight.Get(22); ok {
		t.Fatal("the new connection's PUBACK left the message in flight")
	}
	if n := atomic.LoadInt64(&s.Info.Inflight); n != 0 {
		t.Fatalf("Info.Inflight %d after both acknowledgements, want 0 (counted once)", n)
	}
}
