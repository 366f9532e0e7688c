package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMatchTopic(t *testing.T) {
	cases := []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"+/+", "a", false},
		{"$share/g/a/+", "a/b", true},
		{"a/b/c", "a/b", false},
	}
	for _, c := range cases {
		if got := MatchTopic(c.filter, c.topic); got != c.want {
			t.Errorf("MatchTopic(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}

func TestReceipt(t *testing.T) {
	r, complete := NewReceipt()
	if !errors.Is(r.Err(), ErrPending) {
		t.Fatalf("pending receipt Err = %v", r.Err())
	}
	if _, ok := r.Accepted(); ok {
		t.Fatal("pending receipt reports accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on pending = %v", err)
	}
	at := time.Unix(0, 12345)
	complete(at, nil)
	complete(time.Now(), errors.New("ignored"))
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Accepted(); !ok || !got.Equal(at) {
		t.Fatalf("Accepted = %v %v", got, ok)
	}

	r2, complete2 := NewReceipt()
	complete2(time.Now(), ErrConnectionLost)
	<-r2.Done()
	if !errors.Is(r2.Err(), ErrConnectionLost) {
		t.Fatalf("Err = %v", r2.Err())
	}
	if _, ok := r2.Accepted(); ok {
		t.Fatal("failed receipt reports accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	bad := Options{ProtocolVersion: 7, KeepAlive: -1, Will: &Will{QoS: 3}, Password: "x"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{"ProtocolVersion 7", "KeepAlive", "Will.Topic", "Will.QoS 3", "Password without Username"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	good := Options{}.WithDefaults(func() string { return "x" })
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if good.ClientID != "iotq-x" || good.ProtocolVersion != ProtocolMQTT311 || good.KeepAlive != 60*time.Second {
		t.Fatalf("defaults: %+v", good)
	}
}

// TestCheckPublishExtras: properties and a message id are refused where a
// protocol has no place for them (before: MQTT and CoAP had no such
// options to ignore).
func TestCheckPublishExtras(t *testing.T) {
	props := PublishOptions{Properties: map[string]string{"k": "v"}}
	id := PublishOptions{MessageID: "m1"}
	if err := CheckPublishExtras("MQTT 3.1.1", props, false, false); err == nil || !strings.Contains(err.Error(), "MQTT 3.1.1") {
		t.Errorf("properties: %v", err)
	}
	if err := CheckPublishExtras("CoAP", id, false, false); err == nil || !strings.Contains(err.Error(), "message id") {
		t.Errorf("message id: %v", err)
	}
	if err := CheckPublishExtras("AMQP", PublishOptions{Properties: props.Properties, MessageID: "x"}, true, true); err != nil {
		t.Errorf("AMQP: %v", err)
	}
	if err := CheckPublishExtras("CoAP", PublishOptions{QoS: 1}, false, false); err != nil {
		t.Errorf("no extras: %v", err)
	}
}
