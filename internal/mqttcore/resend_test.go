// SPDX-License-Identifier: MIT

package mqttcore

import (
	"io"
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
