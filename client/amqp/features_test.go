package amqp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/amqp"
	"github.com/iotq/iotq/internal/protonbroker"
	"github.com/iotq/iotq/internal/testutil"
)

// publish sends one QoS 1 message and waits for its accepted disposition.
func publish(t *testing.T, ctx context.Context, c client.Client, topic, payload string, o client.PublishOptions) {
	t.Helper()
	o.QoS = 1
	r, err := c.Publish(ctx, topic, []byte(payload), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("publish %s to %s: %v", payload, topic, err)
	}
}

// none fails if a message arrives within d.
func (c collector) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-c:
		t.Fatalf("unexpected message %q on %q", m.Payload, m.Topic)
	case <-time.After(d):
	}
}

// TestDurableSubscription: with PersistentSession the subscription is
// durable on ActiveMQ Artemis: a message published while the subscriber
// is away arrives when it subscribes again with the same client id. Before,
// the option was ignored over AMQP (a plain receiver link) and the
// message was lost. The Qpid Proton broker keeps no subscriptions: its
// attach answers durable none, and Subscribe fails with ErrNotDurable
// (before: no error, the option silently ignored). Without a client id
// Dial refuses the option.
func TestDurableSubscription(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(120*time.Second))
	defer cancel()
	t.Run("artemis", func(t *testing.T) {
		art := testutil.StartArtemis(t, false)
		o := client.Options{ClientID: "iotq-durable-1", PersistentSession: true}
		topic := "iotq.durable.t"
		col := make(collector, 10)
		sub := dial(t, ctx, art.URL(), o)
		if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
			t.Fatal(err)
		}
		pub := dial(t, ctx, art.URL(), client.Options{})
		publish(t, ctx, pub, topic, "m0", client.PublishOptions{})
		if m := col.wait(t, 1)[0]; string(m.Payload) != "m0" {
			t.Fatalf("first message %q", m.Payload)
		}
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
		publish(t, ctx, pub, topic, "m1", client.PublishOptions{}) // the subscriber is away
		publish(t, ctx, pub, topic, "m2", client.PublishOptions{})
		sub = dial(t, ctx, art.URL(), o)
		if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
			t.Fatal(err)
		}
		for i, m := range col.wait(t, 2) {
			if want := []string{"m1", "m2"}[i]; string(m.Payload) != want || m.Topic != topic {
				t.Fatalf("after resubscribing, message %d: %q on %q, want %q", i, m.Payload, m.Topic, want)
			}
		}
		publish(t, ctx, pub, topic, "m3", client.PublishOptions{})
		if m := col.wait(t, 1)[0]; string(m.Payload) != "m3" {
			t.Fatalf("live message %q", m.Payload)
		}
		// a non-durable subscriber of another client id misses what was sent while it was away
		plain := dial(t, ctx, art.URL(), client.Options{ClientID: "iotq-durable-2"})
		pcol := make(collector, 10)
		if err := plain.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, pcol.handle); err != nil {
			t.Fatal(err)
		}
		plain.Close()
		publish(t, ctx, pub, topic, "m4", client.PublishOptions{})
		plain = dial(t, ctx, art.URL(), client.Options{ClientID: "iotq-durable-2"})
		if err := plain.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, pcol.handle); err != nil {
			t.Fatal(err)
		}
		pcol.none(t, time.Second)
	})
	t.Run("proton refuses", func(t *testing.T) {
		pb := testutil.StartProton(t, protonbroker.Options{})
		c := dial(t, ctx, pb.URL(), client.Options{ClientID: "iotq-durable-3", PersistentSession: true})
		err := c.Subscribe(ctx, "iotq.durable.t", client.SubscribeOptions{QoS: 1}, func(client.Message) {})
		if !errors.Is(err, amqp.ErrNotDurable) {
			t.Fatalf("durable subscription on a broker that keeps none: %v", err)
		}
		t.Log(err)
	})
	t.Run("needs a client id", func(t *testing.T) {
		pb := testutil.StartProton(t, protonbroker.Options{})
		c, err := client.Dial(ctx, pb.URL(), client.Options{PersistentSession: true, Logger: testutil.Logger(t)})
		if err == nil {
			c.Close()
			t.Fatal("PersistentSession without ClientID: dialled")
		}
		if !strings.Contains(err.Error(), "client id") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestArtemisWildcard: ActiveMQ Artemis's wildcards (# for any number of
// words, * for one, . between them) pass through: a subscription to
// iotq.wild.# gets iotq.wild.a.b and iotq.wild.c, each with the address it
// was sent to as its topic (before: the filter was refused with
// ErrWildcard, and a message's topic was the subscription's address). +
// is refused with a hint. On the Qpid Proton broker (no wildcards) # is
// refused.
func TestArtemisWildcard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
	defer cancel()
	art := testutil.StartArtemis(t, false)
	sub := dial(t, ctx, art.URL(), client.Options{})
	col, one := make(collector, 10), make(collector, 10)
	if err := sub.Subscribe(ctx, "iotq.wild.#", client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
		t.Fatal(err)
	}
	if err := sub.Subscribe(ctx, "iotq.wild.*", client.SubscribeOptions{QoS: 1}, one.handle); err != nil {
		t.Fatal(err)
	}
	pub := dial(t, ctx, art.URL(), client.Options{})
	for _, topic := range []string{"iotq.wild.a.b", "iotq.wild.c", "iotq.other"} {
		publish(t, ctx, pub, topic, topic, client.PublishOptions{})
	}
	for i, m := range col.wait(t, 2) {
		if want := []string{"iotq.wild.a.b", "iotq.wild.c"}[i]; m.Topic != want || string(m.Payload) != want {
			t.Fatalf("message %d on iotq.wild.#: %q on %q, want topic %s", i, m.Payload, m.Topic, want)
		}
	}
	if m := one.wait(t, 1)[0]; m.Topic != "iotq.wild.c" {
		t.Fatalf("iotq.wild.* got %q on %q", m.Payload, m.Topic)
	}
	col.none(t, 500*time.Millisecond)
	one.none(t, 0)
	if err := sub.Subscribe(ctx, "iotq.wild/+", client.SubscribeOptions{}, col.handle); !errors.Is(err, amqp.ErrWildcard) || !strings.Contains(err.Error(), "Artemis") {
		t.Fatalf("+ on Artemis: %v", err)
	}
	if _, err := pub.Publish(ctx, "iotq.wild.#", nil, client.PublishOptions{}); !errors.Is(err, amqp.ErrWildcard) {
		t.Fatalf("publish to a wildcard: %v", err)
	}

	pb := testutil.StartProton(t, protonbroker.Options{})
	pc := dial(t, ctx, pb.URL(), client.Options{})
	if err := pc.Subscribe(ctx, "iotq.wild.#", client.SubscribeOptions{}, col.handle); !errors.Is(err, amqp.ErrWildcard) {
		t.Fatalf("# on the Proton broker: %v", err)
	}
}

// TestPropertiesAndBodies, on both brokers: application properties and a
// message id set on Publish arrive in the Message; a message sent by
// another AMQP client (go-amqp directly) with an AMQP value body (map,
// list, int, null, string) or application properties of other types
// arrives readable: Payload the value as JSON (strings as they are),
// ValueType its type. Before: Properties and MessageID did not exist, and
// a map arrived as Go's fmt rendering ("map[a:1]"), null as an empty
// payload.
func TestPropertiesAndBodies(t *testing.T) {
	for _, name := range []string{"artemis", "proton"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
			defer cancel()
			var url string
			if name == "artemis" {
				url = testutil.StartArtemis(t, false).URL()
			} else {
				url = testutil.StartProton(t, protonbroker.Options{}).URL()
			}
			topic := "iotq.props"
			col := make(collector, 20)
			sub := dial(t, ctx, url, client.Options{})
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
				t.Fatal(err)
			}
			pub := dial(t, ctx, url, client.Options{})
			publish(t, ctx, pub, topic, "p", client.PublishOptions{Properties: map[string]string{"unit": "C", "room": "k1"}, MessageID: "id-42"})
			m := col.wait(t, 1)[0]
			if string(m.Payload) != "p" || m.MessageID != "id-42" || len(m.Properties) != 2 || m.Properties["unit"] != "C" ||
				m.Properties["room"] != "k1" || m.ValueType != "" || m.Topic != topic {
				t.Fatalf("message %+v", m)
			}

			conn, err := goamqp.Dial(ctx, url, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			snd, err := sess.NewSender(ctx, topic, nil)
			if err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				value any
				typ   string
				want  string
			}{
				{map[string]any{"t": int32(21), "ok": true, "tags": []any{"a", "b"}}, "map", `{"ok":true,"t":21,"tags":["a","b"]}`},
				{[]any{int64(1), "two", nil}, "list", `[1,"two",null]`},
				{int32(-7), "int", "-7"},
				{nil, "null", "null"},
				{"text", "string", "text"},
			}
			for _, c := range cases {
				msg := &goamqp.Message{Value: c.value, ApplicationProperties: map[string]any{"n": int64(5), "s": "x"},
					Properties: &goamqp.MessageProperties{MessageID: uint64(9)}}
				if err := snd.Send(ctx, msg, nil); err != nil {
					t.Fatalf("send %v: %v", c.value, err)
				}
			}
			for i, m := range col.wait(t, len(cases)) {
				c := cases[i]
				if string(m.Payload) != c.want || m.ValueType != c.typ || m.Properties["n"] != "5" || m.Properties["s"] != "x" ||
					m.MessageID != "9" || m.Topic != topic {
					t.Errorf("value %#v: payload %s type %q properties %v id %q topic %q; want %s (%s)",
						c.value, m.Payload, m.ValueType, m.Properties, m.MessageID, m.Topic, c.want, c.typ)
				}
			}
		})
	}
}
