package broker_test

import (
	"fmt"

	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestNoQoS0LossPointToPoint is the bar: 10 publisher/subscriber
// pairs over TCP offering 50k msg/s of 100-byte QoS 0 messages in total lose
// nothing. Backpressure makes this independent of machine speed: a slow
// broker slows the publishers down instead of dropping.
func TestNoQoS0LossPointToPoint(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	addr := strings.TrimPrefix(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://")
	res := runLoad(t, loadSpec{
		dial:     func() (net.Conn, error) { return net.Dial("tcp", addr) },
		pairs:    10,
		messages: 100_000,
		rate:     50_000,
		size:     100,
		idle:     testutil.Scale(5 * time.Second),
	})
	t.Log(res)
	if res.lost() != 0 || res.published != 100_000 {
		t.Fatalf("lost messages: %v", res)
	}
}

// TestSlowConsumerQoS0IsCountedNotSilent: a subscriber that never reads
// gets its QoS 0 messages dropped after max_stall, and every drop is
// counted; the publisher is held back meanwhile, not disconnected.
func TestSlowConsumerPolicies(t *testing.T) {
	for _, policy := range []string{broker.PolicyDrop, broker.PolicyDisconnect} {
		t.Run("policy "+policy, func(t *testing.T) {
			srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{
				QueueLength: 64, MaxStall: 200 * time.Millisecond, SlowConsumer: policy, WriteBuffer: 512,
			}, Metrics: "127.0.0.1:0"})
			addr := strings.TrimPrefix(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://")
			dial := func() (net.Conn, error) { return net.Dial("tcp", addr) }
			c, _ := dial()
			stuck, err := rawConnect(c, "stuck")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close() // keeps the stuck client alive (and its conn out of the GC's reach)
			if err := stuck.subscribe("slow", 0); err != nil {
				t.Fatal(err)
			}
			// Shrink the stuck client's receive buffer so the broker's
			// writes block soon.
			_ = c.(*net.TCPConn).SetReadBuffer(4096)
			c2, _ := dial()
			pub, err := rawConnect(c2, "pub")
			if err != nil {
				t.Fatal(err)
			}
			payload := make([]byte, 1000)
			deadline := time.Now().Add(testutil.Scale(20 * time.Second))
			for i := 1; ; i++ {
				pub.publish("slow", 0, 0, payload)
				if i%500 != 0 {
					continue
				}
				if err := pub.flush(); err != nil {
					t.Fatalf("publisher was cut off: %v", err)
				}
				m := scrape(t, srv)
				if policy == broker.PolicyDrop && metricValue(m, `iotq_broker_messages_dropped_total{qos="0",reason="queue_full"}`) > 0 {
					break
				}
				if policy == broker.PolicyDisconnect && metricValue(m, `iotq_broker_messages_dropped_total{qos="0",reason="slow_consumer"}`) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no drop counted after %d messages", i)
				}
			}
			if policy == broker.PolicyDisconnect {
				testutil.Eventually(t, 5*time.Second, func() error {
					if srv.Subscriptions("stuck") > 0 {
						return notYet("stuck still connected")
					}
					return nil
				})
			}
			// The publisher is still served.
			box := newInbox()
			u := brokertest.Endpoint(t, srv, "mqtt")
			sub := v3Client(t, srv, u, "fresh", nil)
			wait(t, sub.Subscribe("other", 0, box.v3Handler()), "subscribe")
			pub.publish("other", 0, 0, []byte("alive"))
			if err := pub.flush(); err != nil {
				t.Fatal(err)
			}
			box.waitN(t, 1, 10*time.Second)
		})
	}
}

// TestSlowConsumerKeepsQoS1: a persistent QoS 1 subscriber that stops
// reading is disconnected by the slow-consumer policy, and every message is
// delivered when it comes back.
func TestSlowConsumerKeepsQoS1(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{
		QueueLength: 64, MaxStall: 200 * time.Millisecond, WriteBuffer: 512, WriteTimeout: 300 * time.Millisecond,
	}})
	u := brokertest.Endpoint(t, srv, "mqtt")
	addr := strings.TrimPrefix(u, "mqtt://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	stuck, err := rawConnectSession(c, "stuck", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := stuck.subscribe("q1", 1); err != nil {
		t.Fatal(err)
	}
	const n = 6000
	pub := v3Client(t, srv, u, "pub", func(o *pahov3.ClientOptions) { o.SetWriteTimeout(0) })
	payload := strings.Repeat("x", 1000)
	toks := make([]pahov3.Token, 0, n)
	for i := range n {
		toks = append(toks, pub.Publish("q1", 1, false, fmt.Sprintf("%05d%s", i, payload)))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(testutil.Scale(30*time.Second)) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
	// A sentinel through the same publisher connection: once it is
	// delivered, the broker has handed every earlier message to the stuck
	// session (the publisher's messages are processed in order).
	sentinel := newInbox()
	watcher := v3Client(t, srv, u, "watcher", nil)
	wait(t, watcher.Subscribe("sentinel", 1, sentinel.v3Handler()), "subscribe sentinel")
	wait(t, pub.Publish("sentinel", 1, false, "done"), "publish sentinel")
	sentinel.waitN(t, 1, 10*time.Second)
	testutil.Eventually(t, 10*time.Second, func() error {
		if srv.Subscriptions("stuck") > 0 {
			return notYet("stuck subscriber still connected")
		}
		return nil
	})
	_ = c.Close()
	seen := make(chan string, 2*n)
	back := v3Client(t, srv, u, "stuck", func(o *pahov3.ClientOptions) {
		o.SetCleanSession(false).SetDefaultPublishHandler(func(_ pahov3.Client, m pahov3.Message) { seen <- string(m.Payload()[:5]) })
	})
	_ = back
	got := map[string]bool{}
	deadline := time.After(testutil.Scale(30 * time.Second))
	for len(got) < n {
		select {
		case id := <-seen:
			got[id] = true
		case <-deadline:
			var missing []string
			for i := range n {
				if id := fmt.Sprintf("%05d", i); !got[id] {
					missing = append(missing, id)
				}
			}
			t.Fatalf("after reconnect got %d of %d distinct QoS 1 messages; missing %v", len(got), n, missing[:min(10, len(missing))])
		}
	}
}

// TestPacketIDSpacesAreSeparate: a client's QoS 1 PUBLISH that reuses the
// identifier of an unacknowledged message the broker sent it must not
// delete that message (MQTT keeps one identifier space per direction;
// mochi shares one map).
func TestPacketIDSpacesAreSeparate(t *testing.T) {
	for _, inQoS := range []byte{1, 2} {
		t.Run(fmt.Sprintf("inbound QoS %d", inQoS), func(t *testing.T) { testPacketIDSpaces(t, inQoS) })
	}
}

func testPacketIDSpaces(t *testing.T, inQoS byte) {
	s, id, reconnect := unackedDelivery(t)
	// Publish with the same identifier, without acknowledging "hello".
	s.publish("elsewhere", inQoS, id, []byte("mine"))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if inQoS == 1 {
		expectAck(t, s, 4, id) // PUBACK
	} else {
		expectAck(t, s, 5, id) // PUBREC
		s.w.Write([]byte{0x62, 2, byte(id >> 8), byte(id)})
		if err := s.flush(); err != nil {
			t.Fatal(err)
		}
		expectAck(t, s, 7, id) // PUBCOMP
	}
	reconnect()
}

// TestStrayAcksLeaveMessagesAlone: a PUBREC, PUBREL or PUBCOMP under the
// identifier of a QoS 1 message the broker has in flight to the client
// acknowledges nothing: the message stays in the session and comes again
// after a reconnect. (The engine completed or replaced whatever its map
// held under the identifier; a PUBREL must match an inbound QoS 2
// exchange, a PUBREC or PUBCOMP an outbound one [MQTT-4.3.3].)
func TestStrayAcksLeaveMessagesAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		typ      byte // the stray acknowledgement's first byte
		response byte // the packet type the broker answers with, 0: none
	}{
		{"PUBREC", 0x50, 6},  // PUBREL "packet identifier not found"
		{"PUBREL", 0x62, 7},  // PUBCOMP "packet identifier not found"
		{"PUBCOMP", 0x70, 0}, // nothing
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, id, reconnect := unackedDelivery(t)
			s.w.Write([]byte{tc.typ, 2, byte(id >> 8), byte(id)})
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
			if tc.response != 0 {
				expectAck(t, s, tc.response, id)
			}
			reconnect()
		})
	}
}

// unackedDelivery starts a broker, connects a raw MQTT 3.1.1 client with
// a persistent session subscribed to "to-s" at QoS 1 and publishes
// "hello" to it. It returns the client, once the delivery has arrived
// unacknowledged, with the delivery's packet identifier, and reconnect:
// it closes that connection, connects again and fails the test unless
// "hello" comes again.
func unackedDelivery(t *testing.T) (s *rawClient, id uint16, reconnect func()) {
	t.Helper()
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir()})
	u := brokertest.Endpoint(t, srv, "mqtt")
	addr := strings.TrimPrefix(u, "mqtt://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err = rawConnectSession(c, "bidir", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.subscribe("to-s", 1); err != nil {
		t.Fatal(err)
	}
	pub := v3Client(t, srv, u, "pub", nil)
	wait(t, pub.Publish("to-s", 1, false, "hello"), "publish")

	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	for {
		typ, flags, body, err := s.read()
		if err != nil {
			t.Fatal(err)
		}
		if typ == 3 {
			_, _, id, _, err = parsePublish(flags, body)
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	reconnect = func() {
		t.Helper()
		_ = c.Close()
		c2, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		s2, err := rawConnectSession(c2, "bidir", false)
		if err != nil {
			t.Fatal(err)
		}
		_ = c2.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
		for {
			typ, flags, body, err := s2.read()
			if err != nil {
				t.Fatalf("\"hello\" was not redelivered: %v", err)
			}
			if typ == 3 {
				if _, _, _, payload, _ := parsePublish(flags, body); string(payload) == "hello" {
					return
				}
			}
		}
	}
	return s, id, reconnect
}

// expectAck reads s until a packet of type typ for identifier id arrives.
func expectAck(t *testing.T, s *rawClient, typ byte, id uint16) {
	t.Helper()
	for {
		got, _, body, err := s.read()
		if err != nil {
			t.Fatalf("waiting for packet type %d, identifier %d: %v", typ, id, err)
		}
		if got == typ && len(body) >= 2 && uint16(body[0])<<8|uint16(body[1]) == id {
			return
		}
	}
}

// TestStuckQoS1SubscriberHoldsPublisherOnlyMaxStall: a QoS 1 subscriber
// that stops reading holds its publisher back for about max_stall, not for
// write_timeout: the publisher's reader must not wait for a lock the stuck
// writer holds (it used to, in the engine's packet-identifier allocation).
func TestStuckQoS1SubscriberHoldsPublisherOnlyMaxStall(t *testing.T) {
	const writeTimeout = time.Minute
	srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{
		QueueLength: 64, MaxStall: 200 * time.Millisecond, WriteBuffer: 512, WriteTimeout: writeTimeout,
	}, Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	c, err := net.Dial("tcp", strings.TrimPrefix(u, "mqtt://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	stuck, err := rawConnectSession(c, "stuck", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := stuck.subscribe("q1", 1); err != nil {
		t.Fatal(err)
	}
	pub := v3Client(t, srv, u, "pub", func(o *pahov3.ClientOptions) { o.SetWriteTimeout(0) })
	payload := strings.Repeat("x", 1000)
	start := time.Now()
	// Well within write_timeout even on a loaded machine; a publisher held
	// until write_timeout would take a minute.
	limit := min(testutil.Scale(20*time.Second), writeTimeout/2)
	// Publish until the policy cuts the subscriber off (kernel buffers
	// take megabytes before the writer blocks).
	var longest time.Duration
	for i := 0; srv.Subscriptions("stuck") > 0; i++ {
		if i == 20000 {
			t.Fatalf("stuck subscriber still connected after %d messages", i)
		}
		sent := time.Now()
		tok := pub.Publish("q1", 1, false, fmt.Sprintf("%05d%s", i, payload))
		if !tok.WaitTimeout(limit) || tok.Error() != nil {
			t.Fatalf("publish %d not acknowledged within %v (%v since start): the publisher is held by the stuck subscriber; err %v", i, limit, time.Since(start), tok.Error())
		}
		longest = max(longest, time.Since(sent))
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if srv.Subscriptions("stuck") > 0 {
			return notYet("stuck subscriber still connected")
		}
		return nil
	})
	// The stall is counted: stalls_total and the disconnection.
	m := metricsText(t, srv)
	stalls := metricValue(m, "iotq_broker_stalls_total")
	cut := metricValue(m, `iotq_broker_messages_dropped_total{qos="1",reason="slow_consumer"}`)
	t.Logf("longest publish held %v (max_stall 200ms); stalls_total %v, slow_consumer disconnections %v", longest.Round(time.Millisecond), stalls, cut)
	if stalls < 1 || cut < 1 {
		t.Fatalf("the stall was not counted: stalls_total %v, messages_dropped_total{reason=\"slow_consumer\",qos=\"1\"} %v", stalls, cut)
	}
}
