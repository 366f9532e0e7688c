package broker_test

import (
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
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir()})
	u := brokertest.Endpoint(t, srv, "mqtt")
	sub, _ := connectSession(t, srv, u, "slow-acker", true)
	if code, _ := sub.subscribeID(t, 1, "exp/#"); code != 1 {
		t.Fatalf("SUBSCRIBE: reason code %#x", code)
	}
	pub, _ := connectSession(t, srv, u, "exp-pub", true)
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
