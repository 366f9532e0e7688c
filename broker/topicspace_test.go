package broker_test

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestLocalTopicSpace: Server.Publish reaches MQTT subscribers, MQTT
// publishes reach Server.Subscribe, and cancel stops the delivery.
func TestLocalTopicSpace(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	u := brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	sub := v3Client(t, srv, u, "sub", nil)
	wait(t, sub.Subscribe("front/#", 1, box.v3Handler()), "subscribe")
	if err := srv.Publish(broker.Message{Topic: "front/coap", Payload: []byte("from coap"), QoS: 1}); err != nil {
		t.Fatal(err)
	}
	if got := box.waitN(t, 1, 10*time.Second); got[0].payload != "from coap" || got[0].qos != 1 {
		t.Fatalf("MQTT subscriber got %+v", got)
	}

	local := make(chan broker.Message, 4)
	cancel, err := srv.Subscribe("mqtt/+", func(m broker.Message) { local <- m })
	if err != nil {
		t.Fatal(err)
	}
	pub := v3Client(t, srv, u, "pub", nil)
	wait(t, pub.Publish("mqtt/x", 1, false, "to coap"), "publish")
	select {
	case m := <-local:
		if m.Topic != "mqtt/x" || string(m.Payload) != "to coap" {
			t.Fatalf("local subscriber got %+v", m)
		}
	case <-time.After(testutil.Scale(10 * time.Second)):
		t.Fatal("local subscriber got nothing")
	}
	cancel()
	wait(t, pub.Publish("mqtt/x", 1, false, "after cancel"), "publish")
	wait(t, pub.Publish("front/sync", 1, false, "sync"), "publish")
	box.waitN(t, 2, 10*time.Second) // the MQTT path has processed both
	select {
	case m := <-local:
		t.Fatalf("delivered after cancel: %+v", m)
	default:
	}
	if err := srv.Publish(broker.Message{Topic: ""}); err == nil {
		t.Error("empty topic accepted")
	}
	if _, err := srv.Subscribe("a/#/b", func(broker.Message) {}); err == nil {
		t.Error("invalid filter accepted")
	}
}

// TestPubackDoesNotEchoProperties: a PUBACK carries the broker's own
// properties only, not the user properties of the PUBLISH it acknowledges.
func TestPubackDoesNotEchoProperties(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	c := v5Client(t, srv, brokertest.Endpoint(t, srv, "mqtt"), "props", nil)
	pr, err := c.Publish(ctxT(t), &paho.Publish{Topic: "p/x", QoS: 1, Payload: []byte("x"),
		Properties: &paho.PublishProperties{User: paho.UserProperties{{Key: "trace", Value: "abc123"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Properties != nil && len(pr.Properties.User) > 0 {
		t.Fatalf("PUBACK echoes user properties %v", pr.Properties.User)
	}
}
