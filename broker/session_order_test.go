package broker_test

// Persistent sessions as MQTT defines them (issue 17 item 2), checked with
// raw packets so that every flag is seen as it is on the wire:
//   - QoS 1 messages queued for an offline subscriber arrive complete and in
//     the order they were published (3.1.1 and 5.0 section 4.6);
//   - their first delivery has DUP 0: DUP marks a re-delivery of a PUBLISH
//     already sent (3.1.1 section 3.3.1.1, 5.0 section 3.3.1.1);
//   - the client's own packet identifiers are independent of the broker's
//     (3.1.1 section 2.3.1, 5.0 section 2.2.1): a re-SUBSCRIBE whose id is
//     also the id of a queued outbound message is granted;
//   - the same across a broker restart with the store;
//   - the in-flight gauge never goes below 0.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// sessionClient is a raw MQTT client of either version.
type sessionClient struct {
	*rawClient
	v5 bool
}

// connectSession connects id with clean session/start 0 (MQTT 5: session
// expiry 3600 s) and returns the client and CONNACK's session-present flag.
func connectSession(t *testing.T, srv *broker.Server, u, id string, v5 bool) (*sessionClient, bool) {
	t.Helper()
	return connectSessionProps(t, srv, u, id, v5, nil)
}

// connectSessionProps is connectSession with more MQTT 5 CONNECT properties
// (encoded, after the session expiry interval).
func connectSessionProps(t *testing.T, srv *broker.Server, u, id string, v5 bool, props []byte) (*sessionClient, bool) {
	t.Helper()
	c := dial(t, srv, u)
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
	var body []byte
	body = appendStr(body, "MQTT")
	if v5 {
		body = append(body, 5, 0x00, 0, 60)
		body = append(body, byte(5+len(props)), 0x11, 0, 0, 0x0e, 0x10) // properties: session expiry 3600 s
		body = append(body, props...)
	} else {
		body = append(body, 4, 0x00, 0, 60)
	}
	body = appendStr(body, id)
	rc.w.Write(append(appendVarint([]byte{0x10}, len(body)), body...))
	if err := rc.w.Flush(); err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	typ, _, b, err := rc.read()
	if err != nil || typ != 2 || len(b) < 2 || b[1] != 0 {
		t.Fatalf("connect %s: CONNACK type %d body %x err %v", id, typ, b, err)
	}
	return &sessionClient{rawClient: rc, v5: v5}, b[0]&1 == 1
}

// publishQoS1 connects clientID and publishes the QoS 1 messages prefix1
// ... prefixN to topic, and returns once every PUBACK came.
func publishQoS1(t *testing.T, srv *broker.Server, u, clientID, topic, prefix string, n int) *rawClient {
	t.Helper()
	pc := dial(t, srv, u)
	t.Cleanup(func() { pc.Close() })
	pub, err := rawConnect(pc, clientID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		pub.publish(topic, 1, uint16(i), []byte(fmt.Sprintf("%s%d", prefix, i)))
	}
	if err := pub.flush(); err != nil {
		t.Fatal(err)
	}
	for acked := 0; acked < n; {
		_ = pc.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		typ, _, _, err := pub.read()
		if err != nil {
			t.Fatalf("publisher after %d PUBACKs: %v", acked, err)
		}
		if typ == 4 {
			acked++
		}
	}
	return pub
}

// subscribeID sends SUBSCRIBE with packet identifier id for filter at QoS 1
// and returns SUBACK's reason code, skipping PUBLISH packets it reads
// before SUBACK (returned in order).
func (sc *sessionClient) subscribeID(t *testing.T, id uint16, filter string) (code byte, before []rawPublish) {
	t.Helper()
	body := binary.BigEndian.AppendUint16(nil, id)
	if sc.v5 {
		body = append(body, 0)
	}
	body = appendStr(body, filter)
	body = append(body, 1)
	sc.w.Write(append(appendVarint([]byte{0x82}, len(body)), body...))
	if err := sc.w.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		_ = sc.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		typ, flags, b, err := sc.read()
		if err != nil {
			t.Fatalf("waiting for SUBACK: %v", err)
		}
		switch typ {
		case 9:
			if binary.BigEndian.Uint16(b) != id {
				t.Fatalf("SUBACK for id %d, sent %d", binary.BigEndian.Uint16(b), id)
			}
			rest := b[2:]
			if sc.v5 {
				n, k := binary.Uvarint(rest) // property length (small)
				rest = rest[k+int(n):]
			}
			return rest[0], before
		case 3:
			before = append(before, sc.parse(t, flags, b))
		default:
			t.Fatalf("packet type %d while waiting for SUBACK", typ)
		}
	}
}

type rawPublish struct {
	topic   string
	payload string
	id      uint16
	dup     bool
}

func (sc *sessionClient) parse(t *testing.T, flags byte, b []byte) rawPublish {
	t.Helper()
	n := int(binary.BigEndian.Uint16(b))
	p := rawPublish{topic: string(b[2 : 2+n]), dup: flags&0x08 != 0}
	rest := b[2+n:]
	if (flags>>1)&3 > 0 {
		p.id = binary.BigEndian.Uint16(rest)
		rest = rest[2:]
	}
	if sc.v5 {
		l, k := binary.Uvarint(rest)
		rest = rest[k+int(l):]
	}
	p.payload = string(rest)
	return p
}

// receive reads PUBLISH packets until it has n (acknowledging each).
func (sc *sessionClient) receive(t *testing.T, n int, got []rawPublish) []rawPublish {
	t.Helper()
	for len(got) < n {
		_ = sc.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		typ, flags, b, err := sc.read()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(got), n, err)
		}
		if typ != 3 {
			continue
		}
		got = append(got, sc.parse(t, flags, b))
	}
	for _, p := range got {
		if p.id != 0 {
			sc.ack(p.id)
		}
	}
	if err := sc.flush(); err != nil {
		t.Fatal(err)
	}
	return got
}

func checkSessionDelivery(t *testing.T, got []rawPublish, prefix string, n int) {
	t.Helper()
	for i, p := range got {
		want := fmt.Sprintf("%s%d", prefix, i+1)
		if p.payload != want {
			order := make([]string, 0, min(len(got), 12))
			for _, q := range got[:min(len(got), 12)] {
				order = append(order, q.payload)
			}
			t.Fatalf("message %d is %q, want %q: queued QoS 1 messages out of publication order (first: %v)", i+1, p.payload, want, order)
		}
		if p.dup {
			t.Fatalf("message %q has DUP 1 on its first delivery", p.payload)
		}
	}
	if len(got) != n {
		t.Fatalf("%d messages, want %d", len(got), n)
	}
}

func TestOfflineSessionOrderDupAndPacketIDs(t *testing.T) {
	const n = 200
	for _, restart := range []bool{false, true} {
		for _, v5 := range []bool{false, true} {
			name := fmt.Sprintf("v5=%v/restart=%v", v5, restart)
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				opts := broker.Options{StateDir: dir, Listen: []string{"mqtt://127.0.0.1:0"}, Metrics: "127.0.0.1:0"}
				srv := brokertest.Start(t, opts)
				u := brokertest.Endpoint(t, srv, "mqtt")
				id := fmt.Sprintf("order-%v-%v", v5, restart)

				sub, _ := connectSession(t, srv, u, id, v5)
				if code, _ := sub.subscribeID(t, 1, "pn/#"); code != 1 {
					t.Fatalf("first SUBSCRIBE: reason code %#x", code)
				}
				sub.disconnect()
				// Publish once the broker has seen the subscriber go: a
				// message written to a connection that is closing may
				// have been sent, and is rightly resent with DUP 1.
				testutil.Eventually(t, 10*time.Second, func() error {
					if v := metricValue(scrape(t, srv), "iotq_broker_clients_connected"); v != 0 {
						return notYet("%v clients connected", v)
					}
					return nil
				})

				publishQoS1(t, srv, u, id+"-pub", "pn/x", "n", n).disconnect()

				if restart {
					if err := srv.Close(); err != nil {
						t.Fatal(err)
					}
					opts.Listen = []string{"mqtt://" + srv.Addrs()[0].String()}
					srv = brokertest.Start(t, opts)
				}

				sub, present := connectSession(t, srv, u, id, v5)
				if !present {
					t.Fatal("CONNACK session present 0 for a persistent session")
				}
				// The re-SUBSCRIBE reuses id 1, which is also the id of a
				// queued outbound message.
				code, before := sub.subscribeID(t, 1, "pn/#")
				if code != 1 {
					t.Fatalf("re-SUBSCRIBE with packet id 1: reason code %#x (0x91: packet identifier in use; the two directions' ids are independent)", code)
				}
				got := sub.receive(t, n, before)
				checkSessionDelivery(t, got, "n", n)
				testutil.Eventually(t, 10*time.Second, func() error {
					if v := metricValue(scrape(t, srv), "iotq_broker_inflight_messages"); v != 0 {
						return notYet("iotq_broker_inflight_messages = %v after the session drained, want 0", v)
					}
					return nil
				})
				sub.disconnect()
			})
		}
	}
}

// TestZeroLengthClientIDNeedsCleanSession: MQTT 3.1.1 [MQTT-3.1.3-8], a
// zero-length client id with clean session 0 gets CONNACK 0x02 (identifier
// rejected) and the connection closes.
func TestZeroLengthClientIDNeedsCleanSession(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	c := dial(t, srv, srv.Endpoints()[0])
	defer c.Close()
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 4, 0x00, 0, 60)
	body = appendStr(body, "")
	if _, err := c.Write(append(appendVarint([]byte{0x10}, len(body)), body...)); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{c: c, r: bufio.NewReader(c)}
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	typ, _, b, err := rc.read()
	if err != nil || typ != 2 || len(b) != 2 || b[1] != 0x02 {
		t.Fatalf("CONNACK type %d body %x err %v; want return code 0x02 (identifier rejected)", typ, b, err)
	}
	expectClosed(t, c, 10*time.Second, "CONNACK 0x02")
}
