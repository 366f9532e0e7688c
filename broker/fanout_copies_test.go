package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// A QoS 0 message fanned out to several subscribers is queued once for all
// subscribers whose copy is the same (engine patch 33); subscribers whose
// copy differs get their own: a subscription identifier (MQTT 5 section
// 3.3.4, [MQTT-3.3.4-3]), retain-as-published ([MQTT-3.3.1-12]), a topic
// alias. Each subscriber must see exactly its own copy.
func TestFanOutCopiesStayPerSubscriber(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir(), Store: broker.StoreNone})
	u := srv.Endpoints()[0]
	type got struct {
		retain bool
		subIDs []int
		alias  uint16
		topic  string
	}
	var mu sync.Mutex
	recv := map[string][]got{}
	sub := func(id string, s paho.SubscribeOptions, props *paho.SubscribeProperties, aliasMax uint16) {
		conn := dial(t, srv, u)
		c := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: pahopackets.NewThreadSafeConn(conn),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				g := got{retain: pr.Packet.Retain, topic: pr.Packet.Topic}
				if p := pr.Packet.Properties; p != nil {
					if p.SubscriptionIdentifier != nil {
						g.subIDs = append(g.subIDs, *p.SubscriptionIdentifier)
					}
					if p.TopicAlias != nil {
						g.alias = *p.TopicAlias
					}
				}
				mu.Lock()
				recv[id] = append(recv[id], g)
				mu.Unlock()
				return true, nil
			}}})
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		cp := &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true}
		if aliasMax > 0 {
			cp.Properties = &paho.ConnectProperties{TopicAliasMaximum: &aliasMax}
		}
		if _, err := c.Connect(ctx, cp); err != nil {
			t.Fatalf("%s connect: %v", id, err)
		}
		t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
		if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{s}, Properties: props}); err != nil {
			t.Fatalf("%s subscribe: %v", id, err)
		}
		// The broker looks for retained messages after the SUBACK; a
		// second SUBSCRIBE, handled after that look, is the barrier: a
		// message retained later must arrive once, live, not also as a
		// retained message of the first subscription.
		if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "barrier/" + id}}}); err != nil {
			t.Fatalf("%s subscribe: %v", id, err)
		}
	}
	seven := 7
	sub("plain1", paho.SubscribeOptions{Topic: "fan/x"}, nil, 0)
	sub("plain2", paho.SubscribeOptions{Topic: "fan/#"}, nil, 0)
	sub("subid", paho.SubscribeOptions{Topic: "fan/+"}, &paho.SubscribeProperties{SubscriptionIdentifier: &seven}, 0)
	sub("rap", paho.SubscribeOptions{Topic: "fan/x", RetainAsPublished: true}, nil, 0)
	sub("alias", paho.SubscribeOptions{Topic: "fan/x"}, nil, 10)

	pub := v5Client(t, srv, u, "pub", nil)
	for range 3 {
		if _, err := pub.Publish(ctxT(t), &paho.Publish{Topic: "fan/x", QoS: 0, Retain: true, Payload: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testutil.Scale(10 * time.Second))
	for {
		mu.Lock()
		n := 0
		for _, v := range recv {
			n += len(v)
		}
		mu.Unlock()
		if n == 15 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d of 15 deliveries: %v", n, recv)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, gs := range recv {
		for i, g := range gs {
			wantRetain := id == "rap"
			if g.retain != wantRetain {
				t.Errorf("%s message %d: retain %v, want %v", id, i, g.retain, wantRetain)
			}
			if wantIDs := id == "subid"; (len(g.subIDs) == 1 && g.subIDs[0] == 7) != wantIDs || (!wantIDs && len(g.subIDs) > 0) {
				t.Errorf("%s message %d: subscription identifiers %v", id, i, g.subIDs)
			}
			if id != "alias" && g.alias != 0 {
				t.Errorf("%s message %d: topic alias %d, asked for none", id, i, g.alias)
			}
			if id == "alias" && i > 0 && g.alias == 0 {
				t.Errorf("alias message %d: no topic alias after the first", i)
			}
			if g.topic == "" && id != "alias" {
				t.Errorf("%s message %d: empty topic", id, i)
			}
		}
	}
}
