package transport

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// Multi-stream MQTT over QUIC from the client side: Dial with
// QUICOptions.ClientStreams against a multi-stream listener whose conn a
// fake MQTT engine reads.

func publishQoS0(topic, payload string) []byte {
	body := []byte{byte(len(topic) >> 8), byte(len(topic))}
	body = append(body, topic...)
	body = append(body, 0) // no properties
	return mqttPacket(0x30, append(body, payload...)...)
}

// dialClientMux dials f's listener with cs, completes CONNECT/CONNACK and
// returns the client conn and the server's.
func dialClientMux(t *testing.T, f *muxFixture, cs QUICClientStreams) (*clientMux, net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep, err := ParseURL("quic://" + f.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := DialEndpoint(ctx, ep, DialOptions{TLSConfig: f.cliTLS, QUIC: QUICOptions{ClientStreams: cs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	m, ok := c.(*clientMux)
	if !ok {
		t.Fatalf("Dial returned %T, want the multi-stream client conn", c)
	}
	<-m.HandshakeComplete()
	if _, err := c.Write(v5Connect); err != nil {
		t.Fatal(err)
	}
	sc, err := f.l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	_ = sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if pk := readMQTT(t, sc); pk[0] != 0x10 {
		t.Fatalf("first packet 0x%02x, want CONNECT", pk[0])
	}
	if _, err := sc.Write(mqttPacket(0x20, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, c); pk[0] != 0x20 {
		t.Fatalf("client read 0x%02x, want CONNACK", pk[0])
	}
	return m, sc
}

// TestQUICClientStrategies: in each strategy, with uni- and bidirectional
// data streams, three QoS 1 PUBLISH packets (topics a, b, a) reach the
// session over as many streams as the strategy says, with flow headers
// (MQTT-next), and every PUBACK reaches the client.
func TestQUICClientStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		bidi     bool
		streams  uint64
	}{
		{StrategyPerTopic, false, 2},
		{StrategyPerTopic, true, 2},
		{StrategyPerPublish, false, 3},
		{StrategyPerPublish, true, 3},
	} {
		name := tc.strategy + "/uni"
		if tc.bidi {
			name = tc.strategy + "/bidi"
		}
		t.Run(name, func(t *testing.T) {
			noLeak(t) // Close ends every goroutine of the client and the listener
			cnt := &QUICStreamCounters{}
			f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 10, Counters: cnt})
			c, sc := dialClientMux(t, f, QUICClientStreams{Strategy: tc.strategy, Bidirectional: tc.bidi})
			for i, topic := range []string{"a", "b", "a"} {
				if _, err := c.Write(publishQoS1(topic, uint16(i+1), "m")); err != nil {
					t.Fatal(err)
				}
			}
			got := map[uint16]string{}
			for range 3 {
				pk := readMQTT(t, sc)
				p, ok := parsePublish(pk, true)
				if !ok || pk[0]>>4 != 3 {
					t.Fatalf("session read % x, want PUBLISH", pk)
				}
				got[p.id] = p.topic
			}
			if got[1] != "a" || got[2] != "b" || got[3] != "a" {
				t.Fatalf("session got %v, want 1:a 2:b 3:a", got)
			}
			if n := cnt.DataStreams.Load(); n != tc.streams {
				t.Errorf("broker accepted %d data streams, want %d", n, tc.streams)
			}
			if _, err := sc.Write(bytes.Join([][]byte{mqttPacket(0x40, 0, 1), mqttPacket(0x40, 0, 2), mqttPacket(0x40, 0, 3)}, nil)); err != nil {
				t.Fatal(err)
			}
			acked := map[byte]bool{}
			for range 3 {
				pk := readMQTT(t, c)
				if pk[0] != 0x40 {
					t.Fatalf("client read % x, want PUBACK", pk)
				}
				acked[pk[3]] = true
			}
			if len(acked) != 3 {
				t.Fatalf("PUBACKs for %v, want 1, 2, 3", acked)
			}
			st, _ := c.QUICStats()
			if st.DataStreams != tc.streams || st.StreamStrategy != tc.strategy {
				t.Errorf("client stats: %d data streams, strategy %q; want %d, %q", st.DataStreams, st.StreamStrategy, tc.streams, tc.strategy)
			}
		})
	}
}

// TestQUICClientDatagrams: a QoS 0 PUBLISH leaves as a datagram, one too
// large for a datagram on a stream; the broker's QoS 0 delivery as a
// datagram reaches the client's reader; both sides count them.
func TestQUICClientDatagrams(t *testing.T) {
	noLeak(t)
	cnt := &QUICStreamCounters{}
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 10, Datagrams: true, DatagramDelivery: true, Counters: cnt})
	c, sc := dialClientMux(t, f, QUICClientStreams{Strategy: StrategyPerTopic, Datagrams: true})
	big := string(bytes.Repeat([]byte{'x'}, 4000))
	if _, err := c.Write(append(publishQoS0("small", "d"), publishQoS0("big", big)...)); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for range 2 {
		pk := readMQTT(t, sc)
		p, ok := parsePublish(pk, true)
		if !ok {
			t.Fatalf("session read % x, want PUBLISH", pk)
		}
		sizes[p.topic] = len(pk)
	}
	if sizes["small"] == 0 || sizes["big"] < 4000 {
		t.Fatalf("session got %v, want small and big", sizes)
	}
	if n := cnt.DatagramsIn.Load(); n != 1 {
		t.Errorf("broker received %d datagrams, want 1", n)
	}
	st, _ := c.QUICStats()
	if st.DatagramsSent != 1 || st.DatagramsTooLarge != 1 || st.DataStreams != 1 {
		t.Errorf("client sent %d datagrams, %d too large, %d data streams; want 1, 1, 1", st.DatagramsSent, st.DatagramsTooLarge, st.DataStreams)
	}
	if _, err := sc.Write(publishQoS0("down", "dg")); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, c); !bytes.Equal(pk, publishQoS0("down", "dg")) {
		t.Fatalf("client read % x, want the delivery", pk)
	}
	if n := cnt.DatagramsOut.Load(); n != 1 {
		t.Errorf("broker sent %d datagrams, want 1", n)
	}
	if st, _ := c.QUICStats(); st.DatagramsReceived != 1 {
		t.Errorf("client received %d datagrams, want 1", st.DatagramsReceived)
	}
	// Too large for a datagram: the broker sends it on a stream.
	if _, err := sc.Write(publishQoS0("down", big)); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, c); !bytes.Equal(pk, publishQoS0("down", big)) {
		t.Fatalf("client read %d bytes, want the large delivery", len(pk))
	}
	if n := cnt.DatagramsTooBig.Load(); n != 1 {
		t.Errorf("broker counted %d deliveries too large for a datagram, want 1", n)
	}
}

// TestQUICClientServerFlows: deliveries on server-opened per-topic flows
// (bidirectional for QoS 1, with a server flow header) reach the client's
// reader, and its PUBACK goes back on the delivery's flow to the session.
func TestQUICClientServerFlows(t *testing.T) {
	noLeak(t)
	cnt := &QUICStreamCounters{}
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 10, Delivery: DeliveryPerTopic, Counters: cnt})
	c, sc := dialClientMux(t, f, QUICClientStreams{Strategy: StrategyPerTopic})
	if _, err := sc.Write(publishQoS1("t", 7, "srv")); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, c); !bytes.Equal(pk, publishQoS1("t", 7, "srv")) {
		t.Fatalf("client read % x, want the delivery", pk)
	}
	if n := cnt.ServerStreams.Load(); n != 1 {
		t.Fatalf("broker opened %d server streams, want 1", n)
	}
	if _, err := c.Write(mqttPacket(0x40, 0, 7)); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, sc); pk[0] != 0x40 || pk[3] != 7 {
		t.Fatalf("session read % x, want PUBACK 7", pk)
	}
	if st, _ := c.QUICStats(); st.ServerStreams != 1 {
		t.Errorf("client read %d server streams, want 1", st.ServerStreams)
	}
}

// TestQUICClientControlDefault: without ClientStreams Dial returns the
// single-stream conn (no wrapper, ALPN mqtt only).
func TestQUICClientControlDefault(t *testing.T) {
	if (QUICClientStreams{Strategy: "control-only"}).enabled() || (QUICClientStreams{}).enabled() {
		t.Fatal("control strategy enables the multi-stream client")
	}
	if _, err := ParseStrategy("per-stream"); err == nil {
		t.Fatal("ParseStrategy accepted per-stream")
	}
}

// TestQUICClientPerPublishBurst: a burst of per-publish streams far past
// the broker's stream limit waits for stream credit instead of running
// into refused streams: every PUBLISH arrives, none is refused (before
// the client held one credit back, a few of 1000 were refused and lost).
func TestQUICClientPerPublishBurst(t *testing.T) {
	noLeak(t)
	cnt := &QUICStreamCounters{}
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 4, Counters: cnt})
	c, sc := dialClientMux(t, f, QUICClientStreams{Strategy: StrategyPerPublish})
	const n = 300
	werr := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := c.Write(publishQoS0("b", strconv.Itoa(i))); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	seen := map[string]bool{}
	for range n {
		pk := readMQTT(t, sc)
		seen[string(pk[len(publishQoS0("b", "")):])] = true
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if len(seen) != n || cnt.StreamsRefused.Load() != 0 {
		t.Fatalf("%d distinct messages of %d, %d streams refused; want all, none", len(seen), n, cnt.StreamsRefused.Load())
	}
}
