package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/amqp"
	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
)

// collector gathers delivered messages.
type collector chan client.Message

func (c collector) handle(m client.Message) { c <- m }

func (c collector) wait(t *testing.T, n int) []client.Message {
	t.Helper()
	var out []client.Message
	timeout := time.After(testutil.Scale(20 * time.Second))
	for len(out) < n {
		select {
		case m := <-c:
			out = append(out, m)
		case <-timeout:
			t.Fatalf("got %d of %d messages", len(out), n)
		}
	}
	return out
}

func dial(t *testing.T, ctx context.Context, url string, o client.Options) client.Client {
	t.Helper()
	o.Logger = testutil.Logger(t)
	c, err := client.Dial(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pubsub: two subscribers on one address each get every message (Artemis
// plain addresses are multicast); QoS 1 receipts complete on the accepted
// disposition, QoS 0 ones when written.
func pubsub(t *testing.T, ctx context.Context, url string, o client.Options) (pub client.Client) {
	t.Helper()
	topic := "iotq.test." + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, url)
	subs := []collector{make(collector, 10), make(collector, 10)}
	for _, col := range subs {
		s := dial(t, ctx, url, o)
		if err := s.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
			t.Fatal(err)
		}
	}
	pub = dial(t, ctx, url, o)
	for i, qos := range []byte{1, 0, 1} {
		r, err := pub.Publish(ctx, topic, []byte(fmt.Sprintf("m%d", i)), client.PublishOptions{QoS: qos})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		if _, ok := r.Accepted(); !ok {
			t.Fatalf("receipt %d not accepted", i)
		}
	}
	for _, col := range subs {
		msgs := col.wait(t, 3)
		for i, m := range msgs {
			if string(m.Payload) != fmt.Sprintf("m%d", i) || m.Topic != topic {
				t.Fatalf("message %d: %q on %q", i, m.Payload, m.Topic)
			}
		}
	}
	return pub
}

// TestArtemis: our AMQP client against ActiveMQ Artemis over TCP and TLS,
// and over QUIC through iotq gateway; with the gateway's policy accept, the
// second connection with the ticket file uses 0-RTT.
func TestArtemis(t *testing.T) {
	art := testutil.StartArtemis(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(120*time.Second))
	defer cancel()

	t.Run("amqp", func(t *testing.T) {
		pub := pubsub(t, ctx, art.URL(), client.Options{})
		info := pub.ConnectionInfo()
		if info.Protocol != "amqp/1.0" || info.Transport != "amqp" || info.Connack.Before(info.TransportReady) ||
			info.LinkAttached.Before(info.Connack) || info.FirstTransfer.Before(info.LinkAttached) {
			t.Fatalf("connection info %+v", info)
		}
	})
	t.Run("amqp without SASL", func(t *testing.T) {
		pubsub(t, ctx, art.URL()+"?sasl=none", client.Options{})
	})
	t.Run("amqps", func(t *testing.T) {
		pubsub(t, ctx, art.TLSURL(), client.Options{CAFile: art.CAFile})
	})
	t.Run("amqp+quic through the gateway", func(t *testing.T) {
		g, err := gateway.New(gateway.Options{
			Routes: []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{strings.Replace(art.URL(), "amqp://", "tcp://", 1)},
				ALPN: []string{"amqp"}, EarlyData: records.EarlyAccept}},
			StateDir: t.TempDir(), Logger: testutil.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(context.Background()); err != nil { // serves until Close, not until ctx ends
			t.Fatal(err)
		}
		defer g.Close()
		url := strings.Replace(g.Endpoints()[0], "quic://", "amqp+quic://", 1)
		o := client.Options{CAFile: g.CAFile(), SessionCacheFile: filepath.Join(t.TempDir(), "tickets")}
		pub := pubsub(t, ctx, url, o)
		if info := pub.ConnectionInfo(); info.QUIC == nil || info.Transport != "amqp+quic" {
			t.Fatalf("connection info %+v", info)
		}
		again := dial(t, ctx, url, o)
		r, err := again.Publish(ctx, "iotq.test.again", []byte("x"), client.PublishOptions{QoS: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if info := again.ConnectionInfo(); !info.Used0RTT || !info.TLSResumed {
			t.Fatalf("connection with a ticket: Used0RTT %v TLSResumed %v", info.Used0RTT, info.TLSResumed)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		c := dial(t, ctx, art.URL(), client.Options{})
		if _, err := c.Publish(ctx, "a", nil, client.PublishOptions{QoS: 2}); !errors.Is(err, amqp.ErrQoS2) {
			t.Errorf("QoS 2: %v", err)
		}
		for _, f := range []string{"a/#", "a/+", "a.+"} { // MQTT's wildcards; Artemis's # passes (TestArtemisWildcard)
			if err := c.Subscribe(ctx, f, client.SubscribeOptions{}, func(client.Message) {}); !errors.Is(err, amqp.ErrWildcard) {
				t.Errorf("wildcard %s: %v", f, err)
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := c.Publish(ctx, "a", nil, client.PublishOptions{}); !errors.Is(err, client.ErrClosed) {
			t.Errorf("publish after close: %v", err)
		}
	})
}
