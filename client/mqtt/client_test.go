package mqtt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/internal/payload"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

var protocols = []struct {
	name string
	v    int
}{{"mqtt3.1.1", 3}, {"mqtt5", 5}}

// collector gathers messages delivered to a handler.
type collector struct {
	mu   sync.Mutex
	msgs []core.Message
	ch   chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1000)} }

func (c *collector) handle(m core.Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// waitN waits until n messages arrived.
func (c *collector) waitN(t *testing.T, n int, d time.Duration) []core.Message {
	t.Helper()
	deadline := time.After(d)
	for {
		c.mu.Lock()
		if len(c.msgs) >= n {
			out := append([]core.Message(nil), c.msgs...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.ch:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("got %d messages, want %d", len(c.msgs), n)
		}
	}
}

func dialT(t *testing.T, url string, o core.Options) core.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialRaw(ctx, url, o)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMosquittoQoSLevels: our client against a Mosquitto broker, every QoS,
// both MQTT versions; receipts are accepted and carry a time; the payload
// arrives intact.
func TestMosquittoQoSLevels(t *testing.T) {
	m := testutil.StartMosquitto(t, "")
	ctx := context.Background()
	for _, p := range protocols {
		for qos := byte(0); qos <= 2; qos++ {
			t.Run(fmt.Sprintf("%s/qos%d", p.name, qos), func(t *testing.T) {
				topic := fmt.Sprintf("t/%s/%d", p.name, qos)
				sub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
				col := newCollector()
				if err := sub.Subscribe(ctx, topic, core.SubscribeOptions{QoS: qos}, col.handle); err != nil {
					t.Fatal(err)
				}
				pub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
				const n = 20
				var rs []*core.Receipt
				before := time.Now()
				for i := 0; i < n; i++ {
					b, _ := payload.Encode(payload.Header{Seq: uint32(i), SendNs: time.Now().UnixNano()}, 64)
					r, err := pub.Publish(ctx, topic, b, core.PublishOptions{QoS: qos})
					if err != nil {
						t.Fatal(err)
					}
					rs = append(rs, r)
				}
				for i, r := range rs {
					wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					err := r.Wait(wctx)
					cancel()
					if err != nil {
						t.Fatalf("receipt %d: %v", i, err)
					}
					at, ok := r.Accepted()
					if !ok || at.Before(before) {
						t.Fatalf("receipt %d: accepted %v %v", i, at, ok)
					}
				}
				msgs := col.waitN(t, n, 5*time.Second)
				for i, msg := range msgs {
					h, err := payload.Decode(msg.Payload)
					if err != nil {
						t.Fatal(err)
					}
					if h.Seq != uint32(i) || msg.Topic != topic || msg.QoS != qos || len(msg.Payload) != 64 {
						t.Fatalf("message %d: seq %d topic %s qos %d len %d", i, h.Seq, msg.Topic, msg.QoS, len(msg.Payload))
					}
					if msg.Received.UnixNano() < h.SendNs {
						t.Fatalf("message %d received before it was sent", i)
					}
				}
				info := pub.ConnectionInfo()
				if info.Transport != "mqtt" || info.DialStart.IsZero() || info.TransportReady.Before(info.DialStart) || info.Connack.Before(info.TransportReady) {
					t.Fatalf("connection info: %+v", info)
				}
				if want := map[int]string{3: "mqtt/3.1.1", 5: "mqtt/5"}[p.v]; info.Protocol != want {
					t.Fatalf("protocol %q, want %q", info.Protocol, want)
				}
			})
		}
	}
}

// TestMosquittoRetainedAndWill: a retained message reaches a later
// subscriber flagged as retained; a client that vanishes without DISCONNECT
// gets its will published.
func TestMosquittoRetainedAndWill(t *testing.T) {
	m := testutil.StartMosquitto(t, "")
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name+"/retained", func(t *testing.T) {
			topic := "retained/" + p.name
			pub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			r, err := pub.Publish(ctx, topic, []byte("kept"), core.PublishOptions{QoS: 1, Retain: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			sub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			col := newCollector()
			if err := sub.Subscribe(ctx, topic, core.SubscribeOptions{QoS: 1}, col.handle); err != nil {
				t.Fatal(err)
			}
			got := col.waitN(t, 1, 5*time.Second)[0]
			if !got.Retained || string(got.Payload) != "kept" || got.Topic != topic {
				t.Fatalf("got %+v", got)
			}
		})
		t.Run(p.name+"/will", func(t *testing.T) {
			topic := "will/" + p.name
			sub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			col := newCollector()
			if err := sub.Subscribe(ctx, topic, core.SubscribeOptions{QoS: 1}, col.handle); err != nil {
				t.Fatal(err)
			}
			dev := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v, Will: &core.Will{Topic: topic, Payload: []byte("gone"), QoS: 1}})
			// Break the transport under the client: its reads fail, it
			// sees the loss and drops the socket without DISCONNECT.
			_ = rawConn(dev).SetReadDeadline(time.Now())
			got := col.waitN(t, 1, 5*time.Second)[0]
			if string(got.Payload) != "gone" {
				t.Fatalf("will payload %q", got.Payload)
			}
			select {
			case <-dev.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("Done not closed after the connection was cut")
			}
			if !errors.Is(dev.Err(), core.ErrConnectionLost) {
				t.Fatalf("Err = %v, want ErrConnectionLost", dev.Err())
			}
			if _, err := dev.Publish(ctx, topic, nil, core.PublishOptions{}); err == nil {
				t.Fatal("publish on a lost connection succeeded")
			}
		})
		t.Run(p.name+"/clean close", func(t *testing.T) {
			topic := "will2/" + p.name
			sub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			col := newCollector()
			if err := sub.Subscribe(ctx, topic, core.SubscribeOptions{QoS: 1}, col.handle); err != nil {
				t.Fatal(err)
			}
			dev := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v, Will: &core.Will{Topic: topic, Payload: []byte("gone")}})
			dev.Close()
			dev.Close() // idempotent
			if !errors.Is(dev.Err(), core.ErrClosed) {
				t.Fatalf("Err after Close = %v", dev.Err())
			}
			if _, err := dev.Publish(ctx, topic, nil, core.PublishOptions{}); !errors.Is(err, core.ErrClosed) {
				t.Fatalf("publish after Close: %v", err)
			}
			// A clean DISCONNECT must not publish the will. Probe with a
			// marker message: it arrives, the will does not come before it.
			r, _ := sub.Publish(ctx, topic, []byte("marker"), core.PublishOptions{QoS: 1})
			_ = r.Wait(ctx)
			got := col.waitN(t, 1, 5*time.Second)
			if string(got[0].Payload) != "marker" {
				t.Fatalf("will published after a clean close: %q", got[0].Payload)
			}
		})
	}
}

// rawConn returns the transport connection of a client (for fault injection).
func rawConn(c core.Client) *timedConn {
	switch x := c.(type) {
	case *v3Client:
		return x.conn
	case *v5Client:
		return x.conn
	}
	panic("unknown client type")
}

// TestUnreachableBroker: the error says what to check.
func TestUnreachableBroker(t *testing.T) {
	port := testutil.FreePort(t)
	for _, p := range protocols {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := dialRaw(ctx, fmt.Sprintf("mqtt://127.0.0.1:%d", port), core.Options{ProtocolVersion: p.v})
		cancel()
		if err == nil {
			t.Fatal("dial to a closed port succeeded")
		}
		if !errors.Is(err, transport.ErrRefused) || !strings.Contains(err.Error(), "check that a server listens at 127.0.0.1:") {
			t.Fatalf("%s: error lacks a hint: %v", p.name, err)
		}
	}
}

func TestBadOptions(t *testing.T) {
	_, err := dialRaw(context.Background(), "mqtt://127.0.0.1:1", core.Options{ProtocolVersion: 4 + 3})
	if err == nil || !strings.Contains(err.Error(), "ProtocolVersion 7") {
		t.Fatalf("got %v", err)
	}
	ep, err := endpoint.Parse("coap://x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = Dial(context.Background(), ep, core.Options{}); err == nil || !strings.Contains(err.Error(), "not MQTT") {
		t.Fatalf("got %v", err)
	}
}

var _ = bytes.Equal

// dialRaw parses raw (as the CLI or client.Dial would) and dials.
func dialRaw(ctx context.Context, raw string, o core.Options) (core.Client, error) {
	ep, err := endpoint.Parse(raw)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, ep, o)
}

// TestMosquittoSessionBeforeSubscribe closes the client-side window of a
// persistent session: the messages the broker queued for the session
// arrive right after CONNACK, before the application calls Subscribe.
// They must reach the handler once Subscribe registers it, all of them
// and in publication order, and be acknowledged only then: a connection
// that ends before any Subscribe acknowledges nothing (the next connection
// gets them all), and once the handler had them the session never gets
// them again.
func TestMosquittoSessionBeforeSubscribe(t *testing.T) {
	m := testutil.StartMosquitto(t, "")
	ctx := context.Background()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			topic := "session/" + p.name
			so := core.Options{ProtocolVersion: p.v, ClientID: "session-" + p.name, PersistentSession: true}
			sopts := core.SubscribeOptions{QoS: 1}
			first := dialT(t, m.URL(), so)
			if err := first.Subscribe(ctx, topic, sopts, func(core.Message) {}); err != nil {
				t.Fatal(err)
			}
			first.Close()

			pub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			publish := func(i int) {
				t.Helper()
				r, err := pub.Publish(ctx, topic, []byte(strconv.Itoa(i)), core.PublishOptions{QoS: 1})
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := r.Wait(wctx); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			const n = 50
			for i := 0; i < n; i++ {
				publish(i)
			}

			// A connection that ends before its Subscribe: what it
			// received is held, never acknowledged.
			peek := dialT(t, m.URL(), so)
			testutil.Eventually(t, 10*time.Second, func() error {
				if h := inboxOf(peek).heldCount(); h == 0 {
					return errors.New("no session message held yet")
				}
				return nil
			})
			peek.Close()

			// The session's messages arrive during the delay; Subscribe
			// comes after it, as with a slow application.
			sub := dialT(t, m.URL(), so)
			if !sub.ConnectionInfo().SessionPresent {
				t.Fatal("broker did not resume the session")
			}
			time.Sleep(300 * time.Millisecond)
			col := newCollector()
			if err := sub.Subscribe(ctx, topic, sopts, col.handle); err != nil {
				t.Fatal(err)
			}
			checkSeq(t, col.waitN(t, n, 10*time.Second), n)

			// Acknowledged: once message n reached the handler, so had the
			// n before it, and their acknowledgements were written; the
			// SUBACK of a later SUBSCRIBE on the same connection tells
			// that the broker read them (Mosquitto reads one connection's
			// packets in order, but may take over the session for a new
			// connection before it read what a closed one sent last).
			publish(n)
			checkSeq(t, col.waitN(t, n+1, 10*time.Second), n+1)
			if err := sub.Subscribe(ctx, topic+"/barrier", sopts, func(core.Message) {}); err != nil {
				t.Fatal(err)
			}
			sub.Close()
			again := dialT(t, m.URL(), so)
			col2 := newCollector()
			if err := again.Subscribe(ctx, topic, sopts, col2.handle); err != nil {
				t.Fatal(err)
			}
			publish(n + 1)
			for _, msg := range col2.waitN(t, 1, 10*time.Second) {
				if i, _ := strconv.Atoi(string(msg.Payload)); i < n {
					t.Fatalf("message %d delivered again to the next connection: it had not been acknowledged", i)
				}
			}
		})
	}
}

// checkSeq checks that msgs carry the payloads 0, 1, ... want-1 in order.
func checkSeq(t *testing.T, msgs []core.Message, want int) {
	t.Helper()
	var got []string
	for _, msg := range msgs {
		got = append(got, string(msg.Payload))
	}
	ok := len(msgs) == want
	for i := 0; ok && i < want; i++ {
		ok = got[i] == strconv.Itoa(i)
	}
	if !ok {
		t.Fatalf("got payloads %v, want 0 to %d in order (lost, duplicated or out of order)", got, want-1)
	}
}

// inboxOf returns the inbox of a client (to watch held messages).
func inboxOf(c core.Client) *inbox {
	switch x := c.(type) {
	case *v3Client:
		return x.in
	case *v5Client:
		return x.in
	}
	panic("unknown client type")
}

// heldCount returns how many messages wait for a Subscribe.
func (in *inbox) heldCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.held)
}
