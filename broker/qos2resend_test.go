package broker_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// TestQoS2ResendBeforePubrel: a client that sends its QoS 2 PUBLISH again
// (DUP) before its PUBREL, as after a lost PUBREC, gets a PUBREC that
// succeeds and the message reaches subscribers once: "Until it has
// received the corresponding PUBREL packet, the receiver MUST acknowledge
// any subsequent PUBLISH packet with the same Packet Identifier by sending
// a PUBREC. It MUST NOT cause duplicate messages to be delivered to any
// onward recipients in this case" [MQTT-4.3.3-10] (MQTT 3.1.1: [MQTT-4.3.3-2]).
// A PUBREC with a failure code would tell an MQTT 5 client that a message
// already delivered was refused.
func TestQoS2ResendBeforePubrel(t *testing.T) {
	for _, store := range []string{broker.StoreBolt, broker.StoreNone} {
		for _, v := range []byte{4, 5} {
			t.Run(fmt.Sprintf("store %s, protocol level %d", store, v), func(t *testing.T) { testQoS2Resend(t, store, v) })
		}
	}
}

func testQoS2Resend(t *testing.T, store string, version byte) {
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Store: store})
	u := brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	sub := v3Client(t, srv, u, "sub", nil)
	wait(t, sub.Subscribe("q2/#", 2, box.v3Handler()), "subscribe")

	c, err := net.Dial("tcp", strings.TrimPrefix(u, "mqtt://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := &rawClient{c: c}
	rc.r, rc.w = newRawBuffers(c)
	if version == 5 {
		send(t, c, v5Connect("resender", nil))
		if ack := expectPacket(t, rc, 2, 10*time.Second); len(ack) < 2 || ack[1] != 0 {
			t.Fatalf("CONNACK % x", ack)
		}
	} else {
		rc, err = rawConnect(c, "resender")
		if err != nil {
			t.Fatal(err)
		}
	}
	publish := func(topic string, id uint16, dup bool) {
		t.Helper()
		var body []byte
		body = appendStr(body, topic)
		body = append(body, byte(id>>8), byte(id))
		if version == 5 {
			body = append(body, 0) // no properties
		}
		body = append(body, "payload"...)
		h := byte(0x34)
		if dup {
			h |= 0x08
		}
		send(t, c, append(appendVarint([]byte{h}, len(body)), body...))
	}
	pubrec := func(id uint16) {
		t.Helper()
		b := expectPacket(t, rc, 5, 10*time.Second)
		if len(b) < 2 || uint16(b[0])<<8|uint16(b[1]) != id {
			t.Fatalf("PUBREC % x, want identifier %d", b, id)
		}
		if len(b) > 2 && b[2] >= 0x80 {
			t.Fatalf("PUBREC for identifier %d has reason code 0x%02x: a resent QoS 2 PUBLISH must be acknowledged, not refused", id, b[2])
		}
	}
	complete := func(id uint16) {
		t.Helper()
		send(t, c, []byte{0x62, 2, byte(id >> 8), byte(id)})
		b := expectPacket(t, rc, 7, 10*time.Second)
		if len(b) < 2 || uint16(b[0])<<8|uint16(b[1]) != id || len(b) > 2 && b[2] != 0 {
			t.Fatalf("PUBCOMP % x, want identifier %d, success", b, id)
		}
	}

	publish("q2/once", 9, false)
	pubrec(9)
	publish("q2/once", 9, true) // the PUBREC was lost, say
	pubrec(9)
	complete(9)
	// A marker from the same client: when it arrives, anything the resend
	// caused would have arrived before it.
	publish("q2/marker", 10, false)
	pubrec(10)
	complete(10)
	got := box.waitN(t, 2, 10*time.Second)
	for len(got) > 0 && got[len(got)-1].topic != "q2/marker" {
		got = box.waitN(t, len(got)+1, 10*time.Second)
	}
	if len(got) != 2 || got[0].topic != "q2/once" {
		t.Fatalf("subscriber got %v, want q2/once once, then q2/marker", got)
	}
}
