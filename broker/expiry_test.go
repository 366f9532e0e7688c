package broker_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestSentMessageOutlivesItsExpiry: a message's expiry ends only a
// delivery that has not started: "If the Message Expiry Interval has
// passed and the Server has not managed to start onward delivery to a
// matching subscriber, then it MUST delete the copy of the message for
// that subscriber" [MQTT-3.3.2-5]. A QoS 1 message sent and not yet
// acknowledged when its expiry passes stays in the session and is sent
// again after a reconnect [MQTT-4.4.0-1]. (The engine's once-a-second
// sweep removed it: over a slow link the client's PUBACK could arrive
// after the expiry, its identifier already given to the next message.)
func TestSentMessageOutlivesItsExpiry(t *testing.T) {
	srv, u, sub, pub := expiryPair(t, "slow-acker", "exp/#", "exp-pub")
	var body []byte
	body = appendStr(body, "exp/x")
	body = append(body, 0, 1)                // packet identifier 1
	body = append(body, 5, 0x02, 0, 0, 0, 1) // properties: Message Expiry Interval 1 s
	body = append(body, "short-lived"...)
	pub.w.Write(append(appendVarint([]byte{0x32}, len(body)), body...))
	flushOrFail(t, pub.rawClient)
	_ = pub.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	expectAck(t, pub.rawClient, 4, 1)

	p, ok := sub.nextPublish(t, testutil.Scale(10*time.Second))
	if !ok || p.payload != "short-lived" {
		t.Fatalf("first delivery: %+v (ok %v)", p, ok)
	}
	// Past the message's expiry (whole seconds) and a sweep after it.
	time.Sleep(3500 * time.Millisecond)
	_ = sub.c.Close() // no PUBACK

	again, present := connectSession(t, srv, u, "slow-acker", true)
	if !present {
		t.Fatal("CONNACK session present 0 for a persistent session")
	}
	p, ok = again.nextPublish(t, testutil.Scale(5*time.Second))
	if !ok || p.payload != "short-lived" || !p.dup {
		t.Fatalf("after reconnecting: %+v (ok %v), want \"short-lived\" again with DUP 1: it was sent before it expired", p, ok)
	}
}

// TestMessageExpiryIntervalAsPublished: a subscriber gets a message's
// Message Expiry Interval only if its publisher gave one, less the time
// the message waited in the broker [MQTT-3.3.2-6]; "if absent, the
// Application Message does not expire" (MQTT 5.0 section 3.3.2.3.3), so a
// message published without one arrives without one, retained or not.
// (The engine gave every other message its maximum, a day.)
func TestMessageExpiryIntervalAsPublished(t *testing.T) {
	srv, u, sub, pub := expiryPair(t, "expiry-sub", "exp-prop/#", "expiry-pub")
	publish := func(topic string, id uint16, retain bool, props []byte) {
		t.Helper()
		var body []byte
		body = appendStr(body, topic)
		body = append(body, byte(id>>8), byte(id))
		body = appendVarint(body, len(props))
		body = append(body, props...)
		body = append(body, "payload"...)
		h := byte(0x32)
		if retain {
			h |= 1
		}
		pub.w.Write(append(appendVarint([]byte{h}, len(body)), body...))
		flushOrFail(t, pub.rawClient)
		_ = pub.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		expectAck(t, pub.rawClient, 4, id)
	}
	// expiryOf reads the next PUBLISH on sc and returns its Message Expiry
	// Interval (ok false: none). The broker adds no other property here.
	expiryOf := func(sc *sessionClient, topic string) (uint32, bool) {
		t.Helper()
		_ = sc.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		for {
			typ, flags, b, err := sc.read()
			if err != nil {
				t.Fatalf("waiting for %s: %v", topic, err)
			}
			if typ != 3 {
				continue
			}
			n := int(binary.BigEndian.Uint16(b))
			if got := string(b[2 : 2+n]); got != topic {
				t.Fatalf("got PUBLISH on %s, want %s", got, topic)
			}
			rest := b[2+n:]
			if (flags>>1)&3 > 0 {
				rest = rest[2:]
			}
			l, k := binary.Uvarint(rest)
			props := rest[k : k+int(l)]
			switch {
			case len(props) == 0:
				return 0, false
			case len(props) == 5 && props[0] == 0x02:
				return binary.BigEndian.Uint32(props[1:]), true
			}
			t.Fatalf("PUBLISH on %s has properties % x, want none or only a Message Expiry Interval", topic, props)
		}
	}

	publish("exp-prop/none", 1, false, nil)
	if v, ok := expiryOf(sub, "exp-prop/none"); ok {
		t.Fatalf("a message published without an expiry interval arrived with one: %d s", v)
	}
	publish("exp-prop/some", 2, false, []byte{0x02, 0, 0, 0, 100})
	if v, ok := expiryOf(sub, "exp-prop/some"); !ok || v > 100 || v < 95 {
		t.Fatalf("a message published with 100 s arrived with %d s (present %v), want 95-100", v, ok)
	}
	publish("exp-prop/retained", 3, true, nil)
	if v, ok := expiryOf(sub, "exp-prop/retained"); ok {
		t.Fatalf("a retained message published without an expiry interval arrived with one: %d s", v)
	}
	late, _ := connectSession(t, srv, u, "expiry-late", true)
	if code, _ := late.subscribeID(t, 1, "exp-prop/retained"); code != 1 {
		t.Fatalf("SUBSCRIBE: reason code %#x", code)
	}
	if v, ok := expiryOf(late, "exp-prop/retained"); ok {
		t.Fatalf("the retained copy of a message published without an expiry interval came with one: %d s", v)
	}
}

// expiryPair starts a broker with a state directory and connects two MQTT
// 5 sessions: subID, subscribed to filter at QoS 1, and pubID.
func expiryPair(t *testing.T, subID, filter, pubID string) (srv *broker.Server, u string, sub, pub *sessionClient) {
	t.Helper()
	srv = brokertest.Start(t, broker.Options{StateDir: t.TempDir()})
	u = brokertest.Endpoint(t, srv, "mqtt")
	sub, _ = connectSession(t, srv, u, subID, true)
	if code, _ := sub.subscribeID(t, 1, filter); code != 1 {
		t.Fatalf("SUBSCRIBE %s: reason code %#x", filter, code)
	}
	pub, _ = connectSession(t, srv, u, pubID, true)
	return srv, u, sub, pub
}
