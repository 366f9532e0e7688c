package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/coapmsg"
	"github.com/iotq/iotq/transport/endpoint"
)

// The transport matrix: our client against our broker (internal/testutil)
// over every transport, MQTT 3.1.1 and 5: QoS 0, 1, 2, retained, will.
// broker is imported by this test only; package client never imports it.

type inbox struct {
	mu   sync.Mutex
	msgs []client.Message
}

func (b *inbox) handle(m client.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
}

func (b *inbox) wait(t *testing.T, n int) []client.Message {
	t.Helper()
	var out []client.Message
	testutil.Eventually(t, 10*time.Second, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.msgs) < n {
			return fmt.Errorf("got %d messages, want %d", len(b.msgs), n)
		}
		out = append([]client.Message(nil), b.msgs...)
		return nil
	})
	return out
}

func startBroker(t testing.TB) (*broker.Server, map[string]string) {
	srv := brokertest.Start(t, broker.Options{
		Listen:   []string{"mqtt://127.0.0.1:0", "mqtts://127.0.0.1:0", "ws://127.0.0.1:0", "wss://127.0.0.1:0", "quic://127.0.0.1:0"},
		StateDir: t.TempDir(),
	})
	urls := map[string]string{}
	for _, s := range []string{"mqtt", "mqtts", "ws", "wss", "quic"} {
		urls[s] = brokertest.Endpoint(t, srv, s)
	}
	return srv, urls
}

func dial(t testing.TB, url string, o client.Options) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, o)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestTransportMatrix(t *testing.T) {
	srv, urls := startBroker(t)
	ctx := context.Background()
	for _, scheme := range []string{"mqtt", "mqtts", "ws", "wss", "quic"} {
		for _, proto := range []int{3, 5} {
			t.Run(fmt.Sprintf("%s/mqtt%d", scheme, proto), func(t *testing.T) {
				o := client.Options{ProtocolVersion: proto, CAFile: srv.CAFile()}
				base := fmt.Sprintf("m/%s/%d", scheme, proto)
				sub := dial(t, urls[scheme], o)
				var in inbox
				if err := sub.Subscribe(ctx, base+"/#", client.SubscribeOptions{QoS: 2}, in.handle); err != nil {
					t.Fatal(err)
				}
				pub := dial(t, urls[scheme], o)
				for q := byte(0); q <= 2; q++ {
					r, err := pub.Publish(ctx, fmt.Sprintf("%s/q%d", base, q), []byte{q}, client.PublishOptions{QoS: q})
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Wait(ctx); err != nil {
						t.Fatalf("qos %d receipt: %v", q, err)
					}
				}
				msgs := in.wait(t, 3)
				for _, m := range msgs {
					q := m.Payload[0]
					if m.QoS != q || m.Topic != fmt.Sprintf("%s/q%d", base, q) {
						t.Fatalf("message %+v", m)
					}
				}
				info := pub.ConnectionInfo()
				if info.Transport != scheme || info.Connack.IsZero() || info.TransportReady.Before(info.DialStart) {
					t.Fatalf("connection info %+v", info)
				}
				if (scheme == "quic") != (info.QUIC != nil) {
					t.Fatalf("QUIC stats present %v for %s", info.QUIC != nil, scheme)
				}

				// Retained: a later subscriber gets it, flagged.
				r, err := pub.Publish(ctx, base+"/kept", []byte("kept"), client.PublishOptions{QoS: 1, Retain: true})
				if err != nil || r.Wait(ctx) != nil {
					t.Fatalf("retained publish: %v %v", err, r.Err())
				}
				late := dial(t, urls[scheme], o)
				var lin inbox
				if err := late.Subscribe(ctx, base+"/kept", client.SubscribeOptions{QoS: 1}, lin.handle); err != nil {
					t.Fatal(err)
				}
				// The broker may also forward the publish live (retain flag
				// clear) if the subscription raced with it; the retained copy
				// must come either way.
				testutil.Eventually(t, 5*time.Second, func() error {
					lin.mu.Lock()
					defer lin.mu.Unlock()
					for _, m := range lin.msgs {
						if m.Retained && string(m.Payload) == "kept" {
							return nil
						}
					}
					return fmt.Errorf("no retained copy among %+v", lin.msgs)
				})

				// Will: not published on a clean Close (DISCONNECT). That it
				// is published when the connection breaks is tested in
				// client/mqtt, which can break the transport under a client.
				wo := o
				wo.Will = &client.Will{Topic: base + "/will", Payload: []byte("gone"), QoS: 1}
				dev := dial(t, urls[scheme], wo)
				dev.Close()
				r, _ = pub.Publish(ctx, base+"/marker", []byte("m"), client.PublishOptions{QoS: 1})
				_ = r.Wait(ctx)
				all := in.wait(t, 4)
				for _, m := range all {
					if strings.HasSuffix(m.Topic, "/will") {
						t.Fatalf("will published after a clean close")
					}
				}
			})
		}
	}
}

// TestQUIC0RTT: a second process-like connection with the ticket file from
// the first reports used_0rtt and delivers.
func TestQUIC0RTT(t *testing.T) {
	srv, urls := startBroker(t)
	ctx := context.Background()
	sub := dial(t, urls["mqtt"], client.Options{})
	var in inbox
	if err := sub.Subscribe(ctx, "zero/#", client.SubscribeOptions{QoS: 1}, in.handle); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "tickets")
	for _, proto := range []int{3, 5} {
		for i, want0RTT := range []bool{false, true} {
			// One ticket file per protocol: its first connection is full.
			o := client.Options{ProtocolVersion: proto, CAFile: srv.CAFile(), SessionCacheFile: fmt.Sprintf("%s.%d", cache, proto)}
			c := dial(t, urls["quic"], o)
			r, err := c.Publish(ctx, fmt.Sprintf("zero/%d/%d", proto, i), []byte("x"), client.PublishOptions{QoS: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			info := c.ConnectionInfo()
			if info.Used0RTT != want0RTT || info.TLSResumed != want0RTT {
				t.Fatalf("mqtt%d connection %d: used_0rtt %v tls_resumed %v, want %v", proto, i+1, info.Used0RTT, info.TLSResumed, want0RTT)
			}
			c.Close() // flushes the ticket file
		}
	}
	in.wait(t, 4)
}

func TestDialErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		kind error
		want string
	}{
		{"coap://127.0.0.1:1?ack_timeout=50ms&max_retransmit=1", coapmsg.ErrTimeout, "no CoAP endpoint answered a ping"},
		{"amqp://127.0.0.1:1", transport.ErrRefused, "check that a server listens"},
		{"127.0.0.1:1883", endpoint.ErrNoScheme, "mqtt://127.0.0.1:1883"},
		{"gopher://x", endpoint.ErrUnknownScheme, "mqtt, mqtts"},
		{"mqtt://127.0.0.1:1", transport.ErrRefused, "check that a server listens"},
	} {
		_, err := client.Dial(ctx, c.url, client.Options{})
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Dial(%q) = %v, want %v with %q", c.url, err, c.kind, c.want)
		}
		if err != nil && strings.Count(err.Error(), "(") > 2 {
			t.Errorf("Dial(%q) = %v: more than one hint", c.url, err)
		}
	}
	// A QUIC port that never answers: the dial's own timeout error with its
	// one hint, for both MQTT versions (3.1.1 dials on paho's goroutine).
	for _, v := range []int{3, 5} {
		_, err := client.Dial(ctx, "quic://127.0.0.1:9", client.Options{ProtocolVersion: v, ConnectTimeout: time.Second})
		if !errors.Is(err, transport.ErrTimeout) || strings.Count(err.Error(), "(check") != 1 {
			t.Errorf("MQTT %d over a silent QUIC port: %v, want ErrTimeout with one hint", v, err)
		}
	}
	if _, err := client.Dial(ctx, "mqtt://127.0.0.1:1", client.Options{}); errors.Is(err, client.ErrClosed) {
		t.Fatal("unexpected ErrClosed")
	}
}

// TestQUIC0RTTRejected: the broker restarts with new ticket keys; the client
// offers its old ticket, the server rejects the early data, the transport
// falls back to a full handshake under paho, and the message is delivered.
func TestQUIC0RTTRejected(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "quic://" + pc.LocalAddr().String()
	pc.Close()
	state := t.TempDir()
	opts := broker.Options{Listen: []string{url, "mqtt://127.0.0.1:0"}, StateDir: state}
	srv := brokertest.Start(t, opts)
	ca := srv.CAFile()
	// One ticket file per protocol, each filled by the first broker.
	dir := t.TempDir()
	cacheFor := func(proto int) string { return filepath.Join(dir, fmt.Sprintf("tickets.%d", proto)) }
	ctx := context.Background()
	for _, proto := range []int{3, 5, 0} { // 0: for the --early client below (MQTT 3.1.1)
		c := dial(t, url, client.Options{CAFile: ca, SessionCacheFile: cacheFor(proto), ProtocolVersion: proto})
		r, err := c.Publish(ctx, "rej/warmup", []byte("x"), client.PublishOptions{QoS: 1})
		if err != nil || r.Wait(ctx) != nil {
			t.Fatalf("warm-up publish: %v %v", err, r.Err())
		}
		c.Close()
	}
	srv.Close()
	if err := os.Remove(certs.FilesIn(state).TicketKeys); err != nil {
		t.Fatalf("remove ticket keys: %v", err)
	}
	srv2 := brokertest.Start(t, opts)
	sub := dial(t, brokertest.Endpoint(t, srv2, "mqtt"), client.Options{})
	var in inbox
	if err := sub.Subscribe(ctx, "rej/#", client.SubscribeOptions{QoS: 1}, in.handle); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []int{3, 5} {
		c := dial(t, url, client.Options{CAFile: ca, SessionCacheFile: cacheFor(proto), ProtocolVersion: proto})
		r, err := c.Publish(ctx, fmt.Sprintf("rej/%d", proto), []byte("after restart"), client.PublishOptions{QoS: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("mqtt%d: publish after rejected 0-RTT: %v", proto, err)
		}
		info := c.ConnectionInfo()
		if info.Used0RTT || !info.Rejected0RTT || info.TLSResumed {
			t.Fatalf("mqtt%d: used_0rtt %v rejected_0rtt %v tls_resumed %v; want false true false (ticket from other keys)",
				proto, info.Used0RTT, info.Rejected0RTT, info.TLSResumed)
		}
		c.Close()
	}
	// An early PUBLISH written into the rejected 0-RTT flight is resent
	// after the fallback and delivered.
	c := dial(t, url, client.Options{CAFile: ca, SessionCacheFile: cacheFor(0),
		Early: &client.EarlyMessage{Topic: "rej/early", Payload: []byte("early")}})
	if info := c.ConnectionInfo(); !info.Rejected0RTT || info.EarlySent.IsZero() {
		t.Fatalf("early client: rejected_0rtt %v early_sent %v", info.Rejected0RTT, info.EarlySent)
	}
	for _, m := range in.wait(t, 3) {
		if m.Topic == "rej/early" && string(m.Payload) == "early" {
			return
		}
	}
	t.Fatal("early message lost after the 0-RTT rejection")
}

// TestQUIC0RTTEarlyQoS1: a resumed client puts a QoS 1 PUBLISH into the
// 0-RTT flight behind CONNECT; under both broker policies that process
// it (accept: at once, hold: once the handshake completed) its receipt
// completes on the PUBACK, 0-RTT was used and the subscriber gets it once.
func TestQUIC0RTTEarlyQoS1(t *testing.T) {
	for _, policy := range []records.EarlyPolicy{records.EarlyAccept, records.EarlyHold} {
		t.Run(string(policy), func(t *testing.T) {
			srv := brokertest.Start(t, broker.Options{Listen: []string{"quic://127.0.0.1:0", "mqtt://127.0.0.1:0"},
				StateDir: t.TempDir(), QUIC: broker.QUICOptions{EarlyData: policy}})
			url, ca := brokertest.Endpoint(t, srv, "quic"), srv.CAFile()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sub := dial(t, brokertest.Endpoint(t, srv, "mqtt"), client.Options{})
			var in inbox
			if err := sub.Subscribe(ctx, "early/#", client.SubscribeOptions{QoS: 1}, in.handle); err != nil {
				t.Fatal(err)
			}
			for _, proto := range []int{3, 5} {
				cache := filepath.Join(t.TempDir(), "tickets")
				warm := dial(t, url, client.Options{CAFile: ca, SessionCacheFile: cache, ProtocolVersion: proto})
				warm.Close()
				m := &client.EarlyMessage{Topic: fmt.Sprintf("early/%d", proto), Payload: []byte("in the first flight"), QoS: 1}
				c := dial(t, url, client.Options{CAFile: ca, SessionCacheFile: cache, ProtocolVersion: proto, Early: m})
				if err := m.Receipt().Wait(ctx); err != nil {
					t.Fatalf("mqtt%d: early QoS 1 receipt: %v", proto, err)
				}
				info := c.ConnectionInfo()
				if !info.Used0RTT || info.EarlySent.IsZero() {
					t.Fatalf("mqtt%d: used_0rtt %v early_sent %v", proto, info.Used0RTT, info.EarlySent)
				}
				at, _ := m.Receipt().Accepted()
				if at.Before(info.EarlySent) {
					t.Fatalf("mqtt%d: PUBACK at %v before the PUBLISH was written at %v", proto, at, info.EarlySent)
				}
				r, err := c.Publish(ctx, m.Topic, []byte("second"), client.PublishOptions{QoS: 1})
				if err != nil || r.Wait(ctx) != nil {
					t.Fatalf("mqtt%d: publish after the early one: %v %v", proto, err, r.Err())
				}
				c.Close()
			}
			got := map[string]int{}
			for _, msg := range in.wait(t, 4) {
				got[msg.Topic+" "+string(msg.Payload)]++
			}
			for _, proto := range []int{3, 5} {
				if k := fmt.Sprintf("early/%d in the first flight", proto); got[k] != 1 {
					t.Fatalf("subscriber got %v", got)
				}
			}
		})
	}
}
