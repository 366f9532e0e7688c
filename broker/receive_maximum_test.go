package broker_test

// MQTT 5 flow control (section 4.9) on the wire: the broker has no more
// unacknowledged QoS 1 messages out than the client's Receive Maximum
// [MQTT-3.3.4-9], and a message it held back and sent later is
// unacknowledged like any other: it stays in the session until its PUBACK
// [MQTT-4.3.2-2] and is sent again when the client reconnects [MQTT-4.4.0-1],
// in the order of the first sends [MQTT-4.6.0-1].

import (
	"fmt"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// nextPublish reads packets until a PUBLISH and returns it; a read timeout
// (after wait) returns false.
func (sc *sessionClient) nextPublish(t *testing.T, wait time.Duration) (rawPublish, bool) {
	t.Helper()
	for {
		_ = sc.c.SetReadDeadline(time.Now().Add(wait))
		typ, flags, b, err := sc.read()
		if err != nil {
			return rawPublish{}, false
		}
		if typ == 3 {
			return sc.parse(t, flags, b), true
		}
	}
}

func TestReceiveMaximumHeldBackMessagesStayInSession(t *testing.T) {
	const n = 6
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Listen: []string{"mqtt://127.0.0.1:0"}, Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	receiveMaximum2 := []byte{0x21, 0, 2}

	sub, _ := connectSessionProps(t, srv, u, "rmax", true, receiveMaximum2)
	if code, _ := sub.subscribeID(t, 1, "rm/#"); code != 1 {
		t.Fatalf("SUBSCRIBE: reason code %#x", code)
	}
	publishQoS1(t, srv, u, "rmax-pub", "rm/x", "r", n)

	// Receive Maximum 2: r1 and r2, then nothing until a PUBACK.
	var first []rawPublish
	for len(first) < 2 {
		p, ok := sub.nextPublish(t, testutil.Scale(10*time.Second))
		if !ok {
			t.Fatalf("got %d PUBLISH packets of the 2 the Receive Maximum allows", len(first))
		}
		first = append(first, p)
	}
	if p, ok := sub.nextPublish(t, 300*time.Millisecond); ok {
		t.Fatalf("third unacknowledged PUBLISH %q with Receive Maximum 2 [MQTT-3.3.4-9]", p.payload)
	}
	// Acknowledging r1 lets r3 go; r2 and r3 stay unacknowledged.
	sub.ack(first[0].id)
	if err := sub.flush(); err != nil {
		t.Fatal(err)
	}
	third, ok := sub.nextPublish(t, testutil.Scale(10*time.Second))
	if !ok || third.payload != "r3" {
		t.Fatalf("after the PUBACK of %q: got %+v (ok %v), want r3", first[0].payload, third, ok)
	}
	sub.c.Close() // the network goes: no PUBACK for r2 or r3

	testutil.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(scrape(t, srv), "iotq_broker_clients_connected"); v != 1 {
			return notYet("%v clients connected, want 1 (the publisher)", v)
		}
		return nil
	})

	// Back with Receive Maximum 2: r2 and r3 again (sent before: DUP 1),
	// then r4, r5, r6 as the PUBACKs let them go, and nothing twice.
	sub, present := connectSessionProps(t, srv, u, "rmax", true, receiveMaximum2)
	if !present {
		t.Fatal("CONNACK session present 0 for a persistent session")
	}
	var got []rawPublish
	unacked := map[uint16]string{}
	for len(got) < n-1 {
		p, ok := sub.nextPublish(t, testutil.Scale(10*time.Second))
		if !ok {
			t.Fatalf("after reconnecting: got %v, want r2..r%d (r3 was sent and never acknowledged)", got, n)
		}
		got = append(got, p)
		unacked[p.id] = p.payload
		if len(unacked) > 2 {
			t.Fatalf("%d unacknowledged PUBLISH packets out with Receive Maximum 2 [MQTT-3.3.4-9]: %v", len(unacked), unacked)
		}
		// Two out: nothing more until the oldest is acknowledged.
		if len(unacked) == 2 {
			if q, ok := sub.nextPublish(t, 300*time.Millisecond); ok {
				t.Fatalf("third unacknowledged PUBLISH %q after reconnecting with Receive Maximum 2 [MQTT-3.3.4-9] (out: %v)", q.payload, unacked)
			}
			oldest := got[len(got)-2]
			sub.ack(oldest.id)
			if err := sub.flush(); err != nil {
				t.Fatal(err)
			}
			delete(unacked, oldest.id)
		}
	}
	for i, p := range got {
		want := fmt.Sprintf("r%d", i+2)
		if p.payload != want {
			t.Fatalf("after reconnecting, message %d is %q, want %q (all: %v)", i+1, p.payload, want, got)
		}
		if wantDup := i < 2; p.dup != wantDup {
			t.Fatalf("%q has DUP %v, want %v (sent before the connection went: %v)", p.payload, p.dup, wantDup, wantDup)
		}
	}
	for id := range unacked {
		sub.ack(id)
	}
	if err := sub.flush(); err != nil {
		t.Fatal(err)
	}
	if p, ok := sub.nextPublish(t, 300*time.Millisecond); ok {
		t.Fatalf("PUBLISH %q after all %d were delivered", p.payload, n)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(scrape(t, srv), "iotq_broker_inflight_messages"); v != 0 {
			return notYet("iotq_broker_inflight_messages = %v after every message was acknowledged, want 0", v)
		}
		return nil
	})
}

// TestReceiveMaximumHoldsWhileTheClientPublishes: the client's own QoS 2
// exchanges do not widen the window of the broker's messages to it. With
// two unacknowledged messages out at Receive Maximum 2, the client
// publishes a QoS 2 message and completes it (PUBREL, PUBCOMP); the third
// message must still wait for a PUBACK. (The engine gave a send quota back
// for each PUBREL of the client's.)
func TestReceiveMaximumHoldsWhileTheClientPublishes(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Listen: []string{"mqtt://127.0.0.1:0"}})
	u := brokertest.Endpoint(t, srv, "mqtt")
	sub, _ := connectSessionProps(t, srv, u, "rmax-pub2", true, []byte{0x21, 0, 2})
	if code, _ := sub.subscribeID(t, 1, "rm2/#"); code != 1 {
		t.Fatalf("SUBSCRIBE: reason code %#x", code)
	}
	publishQoS1(t, srv, u, "rmax2-pub", "rm2/x", "r", 3)
	for i := range 2 {
		if _, ok := sub.nextPublish(t, testutil.Scale(10*time.Second)); !ok {
			t.Fatalf("got %d PUBLISH packets of the 2 the Receive Maximum allows", i)
		}
	}
	const id = 500
	var body []byte // an MQTT 5 PUBLISH, with its properties length
	body = appendStr(body, "elsewhere")
	body = append(body, id>>8, id&0xff, 0)
	body = append(body, "mine"...)
	sub.w.Write(append(appendVarint([]byte{0x34}, len(body)), body...))
	flushOrFail(t, sub.rawClient)
	expectAck(t, sub.rawClient, 5, id) // PUBREC
	sub.w.Write([]byte{0x62, 2, id >> 8, id & 0xff})
	flushOrFail(t, sub.rawClient)
	expectAck(t, sub.rawClient, 7, id) // PUBCOMP
	if p, ok := sub.nextPublish(t, 300*time.Millisecond); ok {
		t.Fatalf("third unacknowledged PUBLISH %q with Receive Maximum 2 after the client's QoS 2 exchange [MQTT-3.3.4-9]", p.payload)
	}
}
