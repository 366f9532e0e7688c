package mqtt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
