package amqp_test

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/protonbroker"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
)

// earlyBroker is an AMQP 1.0 broker TestEarly runs against.
type earlyBroker struct {
	url, tlsURL, caFile string
}

// TestEarly: the pipelined start (Options.Early) against ActiveMQ Artemis
// and the Qpid Proton broker (Proton-C, which closes a connection whose
// transfer comes before the session window and link credit it granted:
// amqp:session:window-violation), directly over TCP (SASL ANONYMOUS,
// PLAIN, none) and TLS, and over QUIC through iotq gateway. The early
// message's receipt completes on the broker's accepted disposition, a
// subscriber gets it once, and later publishes on the same connection
// (go-amqp's own transfers, delivery ids 1, 2) are accepted too. Over QUIC
// with a ticket and a route that accepts 0-RTT, the start up to the attach
// travels as 0-RTT data and the message does not: a relay counts the
// client's 0-RTT packet bytes.
func TestEarly(t *testing.T) {
	brokers := map[string]func(t *testing.T) earlyBroker{
		"artemis": func(t *testing.T) earlyBroker {
			a := testutil.StartArtemis(t, true)
			return earlyBroker{a.URL(), a.TLSURL(), a.CAFile}
		},
		"proton": func(t *testing.T) earlyBroker {
			p := testutil.StartProton(t, protonbroker.Options{TLS: true, Users: map[string]string{"iotq": "secret"}})
			return earlyBroker{p.URL(), p.TLSURL(), p.CAFile}
		},
	}
	for _, name := range []string{"artemis", "proton"} {
		t.Run(name, func(t *testing.T) { testEarly(t, brokers[name](t)) })
	}
}

func testEarly(t *testing.T, art earlyBroker) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(120*time.Second))
	defer cancel()
	upstream := strings.Replace(art.url, "amqp://", "tcp://", 1)

	// run publishes early on url and checks receipt, delivery (to a
	// subscriber on the broker directly) and what follows; it returns the
	// publisher's connection info.
	run := func(t *testing.T, url, topic string, o client.Options, qos byte, payload []byte) client.ConnectionInfo {
		t.Helper()
		sub := make(collector, 10)
		s := dial(t, ctx, art.url, client.Options{})
		if err := s.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, sub.handle); err != nil {
			t.Fatal(err)
		}
		o.Early = &client.EarlyMessage{Topic: topic, Payload: payload, QoS: qos}
		pub := dial(t, ctx, url, o)
		r := o.Early.Receipt()
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("early receipt: %v", err)
		}
		info := pub.ConnectionInfo()
		at, ok := r.Accepted()
		// The transfer leaves after the broker's attach (and flow).
		if !ok || info.EarlySent.IsZero() || at.Before(info.EarlySent) || info.FirstTransfer != info.EarlySent ||
			info.EarlySent.Before(info.LinkAttached) || info.LinkAttached.Before(info.Connack) || info.Connack.Before(info.DialStart) {
			t.Fatalf("accepted %v at %v; connection info %+v", ok, at, info)
		}
		for i := range 2 {
			r, err := pub.Publish(ctx, topic, []byte{byte('a' + i)}, client.PublishOptions{QoS: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatalf("publish %d after the early one: %v", i, err)
			}
		}
		msgs := sub.wait(t, 3)
		if !bytes.Equal(msgs[0].Payload, payload) || string(msgs[1].Payload) != "a" || string(msgs[2].Payload) != "b" {
			t.Fatalf("delivered %q, %q, %q", msgs[0].Payload, msgs[1].Payload, msgs[2].Payload)
		}
		select {
		case m := <-sub:
			t.Fatalf("a fourth message: %q", m.Payload)
		case <-time.After(200 * time.Millisecond):
		}
		if err := pub.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		return info
	}

	t.Run("amqp", func(t *testing.T) {
		run(t, art.url, "iotq.early.tcp", client.Options{}, 1, []byte("early"))
		run(t, art.url+"?sasl=none", "iotq.early.nosasl", client.Options{}, 1, []byte("early"))
		run(t, art.url, "iotq.early.qos0", client.Options{}, 0, []byte("early"))
		run(t, art.url, "iotq.early.plain", client.Options{Username: "iotq", Password: "secret"}, 1, []byte("early"))
		run(t, art.url, "iotq.early.large", client.Options{}, 1, bytes.Repeat([]byte("L"), 100<<10)) // no 0-RTT bound
	})
	t.Run("amqps", func(t *testing.T) {
		run(t, art.tlsURL, "iotq.early.tls", client.Options{CAFile: art.caFile}, 1, []byte("early"))
	})

	gw := func(t *testing.T, policy records.EarlyPolicy) *gateway.Gateway {
		g, err := gateway.New(gateway.Options{
			Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{upstream}, ALPN: []string{"amqp"}, EarlyData: policy}},
			StateDir: t.TempDir(), Logger: testutil.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(context.Background()); err != nil { // serves until Close, not until ctx ends
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		return g
	}

	t.Run("amqp+quic 0-RTT accepted", func(t *testing.T) {
		g := gw(t, records.EarlyAccept)
		relay := newRelay(t, g.Endpoints()[0])
		url := "amqp+quic://" + relay.Addr()
		o := client.Options{CAFile: g.CAFile(), SessionCacheFile: filepath.Join(t.TempDir(), "tickets")}
		payload := bytes.Repeat([]byte("0rtt"), 750) // 3000 bytes: the flight is larger than any padding
		first := run(t, url, "iotq.early.quic", o, 1, payload)
		if first.Used0RTT || first.TLSResumed {
			t.Fatalf("first connection (no ticket yet): %+v", first)
		}
		info := run(t, url, "iotq.early.quic", o, 1, payload)
		if !info.Used0RTT || !info.TLSResumed || info.Rejected0RTT {
			t.Fatalf("connection with a ticket: Used0RTT %v TLSResumed %v Rejected0RTT %v", info.Used0RTT, info.TLSResumed, info.Rejected0RTT)
		}
		// The resumed publisher is the relay's second client. Its 0-RTT
		// packets carried the start up to the attach (headers, sasl-init,
		// open, begin, attach: some 250 bytes), not the 3000-byte message,
		// which waited for the broker's flow.
		t.Logf("0-RTT packet bytes: first publisher %d, resumed publisher %d", zeroRTTBytes(relay, 0), zeroRTTBytes(relay, 1))
		if n := zeroRTTBytes(relay, 1); n < 200 || n >= 3000 {
			t.Fatalf("0-RTT bytes of the resumed publisher: %d, want the pipelined start without the message (200 to 3000)", n)
		}
		if n := zeroRTTBytes(relay, 0); n != 0 {
			t.Fatalf("0-RTT bytes of the first publisher (no ticket): %d", n)
		}
	})

	t.Run("amqp+quic 0-RTT refused by the route", func(t *testing.T) {
		// The default policy (alpn, for mqtt only) refuses 0-RTT for
		// amqp: the early flight is sent again after the handshake.
		g := gw(t, "")
		url := strings.Replace(g.Endpoints()[0], "quic://", "amqp+quic://", 1)
		o := client.Options{CAFile: g.CAFile(), SessionCacheFile: filepath.Join(t.TempDir(), "tickets")}
		run(t, url, "iotq.early.refused", o, 1, []byte("x"))
		info := run(t, url, "iotq.early.refused", o, 1, []byte("y"))
		if info.Used0RTT || !info.TLSResumed {
			t.Fatalf("route refusing 0-RTT: Used0RTT %v TLSResumed %v", info.Used0RTT, info.TLSResumed)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, e := range []*client.EarlyMessage{{Topic: "a", QoS: 2}, {Topic: "a", Retain: true}, {Topic: strings.Repeat("a", 600)}} {
			if c, err := client.Dial(ctx, art.url, client.Options{Early: e}); err == nil {
				c.Close()
				t.Errorf("early %s QoS %d retain %v %d bytes: no error", e.Topic, e.QoS, e.Retain, len(e.Payload))
			}
			if e.Receipt().Err() == nil {
				t.Errorf("early %s: receipt did not fail", e.Topic)
			}
		}
		if _, err := client.Dial(ctx, art.url, client.Options{Early: &client.EarlyMessage{Topic: "a/#"}}); err == nil {
			t.Error("early to a wildcard: no error")
		}
	})
}

// relayDelay is long enough that a client on a loaded machine has written
// its first flight before the server's answer arrives.
var relayDelay = testutil.Scale(250 * time.Millisecond)

// newRelay starts a testutil.UDPRelay in front of a gateway endpoint
// (quic://HOST:PORT).
func newRelay(t *testing.T, target string) *testutil.UDPRelay {
	t.Helper()
	return testutil.NewUDPRelay(t, udpAddr(t, target), relayDelay)
}

func udpAddr(t *testing.T, target string) *net.UDPAddr {
	t.Helper()
	ta, err := net.ResolveUDPAddr("udp", strings.TrimPrefix(target, "quic://"))
	if err != nil {
		t.Fatal(err)
	}
	return ta
}

// zeroRTTBytes returns the bytes of the 0-RTT packets (the long-header
// packets of type 1, RFC 9000 section 17.2.3, found in coalesced
// datagrams) the i-th client of r sent; -1 if there is no such client.
func zeroRTTBytes(r *testutil.UDPRelay, i int) int {
	sent := r.Sent(i)
	if sent == nil {
		return -1
	}
	total := 0
	for _, d := range sent {
		total += zeroRTTLen(d)
	}
	return total
}

// zeroRTTLen sums the Length fields of the QUIC v1 0-RTT packets in a
// datagram; it stops at the first short-header packet (always last).
func zeroRTTLen(d []byte) int {
	total := 0
	for len(d) > 7 && d[0]&0x80 != 0 {
		typ := (d[0] >> 4) & 0x3
		at := 5
		for range 2 { // destination and source connection ids
			if at >= len(d) {
				return total
			}
			at += 1 + int(d[at])
		}
		if typ == 0 { // Initial: token
			tl, n := varint(d[at:])
			at += n + tl
		}
		if typ == 3 || at >= len(d) { // Retry has no length
			return total
		}
		l, n := varint(d[at:])
		if n == 0 {
			return total
		}
		at += n
		if typ == 1 {
			total += l
		}
		if at+l > len(d) {
			return total
		}
		d = d[at+l:]
	}
	return total
}

func varint(b []byte) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	n := 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0
	}
	v := int(b[0] & 0x3f)
	for _, c := range b[1:n] {
		v = v<<8 | int(c)
	}
	return v, n
}

// TestEarlyReplay: an on-path attacker replays the recorded datagrams of a
// resumed publisher's pipelined start (0-RTT) to the gateway, from another
// port, after the real connection ended. The 0-RTT flight carries the
// start up to the attach, never the message (its transfer waits for the
// broker's flow, one round trip later, after the handshake), so with
// route policy accept as with hold the replay opens a connection and a
// link at the broker but delivers nothing: the message arrives once. The
// Proton broker's log shows the replayed attach (the replay did reach it).
func TestEarlyReplay(t *testing.T) {
	pb := testutil.StartProton(t, protonbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(120*time.Second))
	defer cancel()
	upstream := strings.Replace(pb.URL(), "amqp://", "tcp://", 1)
	for policy, copies := range map[records.EarlyPolicy]int{records.EarlyAccept: 1, records.EarlyHold: 1} {
		t.Run(string(policy), func(t *testing.T) {
			g, err := gateway.New(gateway.Options{
				Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{upstream}, ALPN: []string{"amqp"}, EarlyData: policy}},
				StateDir: t.TempDir(), Logger: testutil.Logger(t), HandshakeTimeout: 2 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Start(context.Background()); err != nil { // serves until Close, not until ctx ends
				t.Fatal(err)
			}
			defer g.Close()
			topic := "iotq.replay." + string(policy)
			sub := make(collector, 10)
			s := dial(t, ctx, pb.URL(), client.Options{})
			if err := s.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, sub.handle); err != nil {
				t.Fatal(err)
			}
			relay := newRelay(t, g.Endpoints()[0])
			url := "amqp+quic://" + relay.Addr()
			o := client.Options{CAFile: g.CAFile(), SessionCacheFile: filepath.Join(t.TempDir(), "tickets")}
			warm := dial(t, ctx, url, o)
			if err := warm.Close(); err != nil {
				t.Fatal(err)
			}
			o.Early = &client.EarlyMessage{Topic: topic, Payload: []byte("once"), QoS: 1}
			pub := dial(t, ctx, url, o)
			if err := o.Early.Receipt().Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if !pub.ConnectionInfo().Used0RTT {
				t.Fatal("the publisher did not use 0-RTT")
			}
			if err := pub.Close(); err != nil {
				t.Fatal(err)
			}
			sub.wait(t, 1)
			// quic-go drops packets for a closed connection's ids for about
			// three probe timeouts; a replay after that is a new connection.
			time.Sleep(4 * time.Second)
			testutil.ReplayUDP(t, udpAddr(t, g.Endpoints()[0]), relay.Sent(1))
			got := 1
			deadline := time.After(testutil.Scale(5 * time.Second))
		wait:
			for got < 2 {
				select {
				case m := <-sub:
					if string(m.Payload) != "once" {
						t.Fatalf("unexpected message %q", m.Payload)
					}
					got++
				case <-deadline:
					break wait
				}
			}
			if got != copies {
				t.Fatalf("policy %s: the early message arrived %d times after a replay, want %d", policy, got, copies)
			}
			if n := strings.Count(pb.Log(), "sender attached to "+topic+"\n"); n != 2 {
				t.Fatalf("policy %s: %d sender links attached to %s, want 2 (the publisher's and the replay's)\n%s", policy, n, topic, pb.Log())
			}
		})
	}
}
