package broker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Message is a message of the topic space, as seen by local fronts.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// Publish puts m into the topic space as if a client had published it:
// MQTT subscribers (and local ones) receive it, a retained message is kept.
// It is meant for other protocol fronts inside iotq (CoAP): the ACL is not
// applied, the caller authorizes. It may wait (at most max_stall) while a
// subscriber's queue is full, like an MQTT publisher.
func (s *Server) Publish(m Message) error { return s.eng.publish(m) }

// Subscribe calls fn for every message published on a topic matching the
// MQTT filter, until cancel is called. fn runs on the publisher's goroutine
// and must not block (hand the message to a queue of your own). The ACL is
// not applied.
func (s *Server) Subscribe(filter string, fn func(Message)) (cancel func(), err error) {
	return s.eng.subscribe(filter, fn)
}

// errNoTopic is returned for an empty topic.
var errNoTopic = errors.New("broker: publish: empty topic")

func (e *mochiEngine) publish(m Message) error {
	if m.Topic == "" {
		return errNoTopic
	}
	if m.QoS > 2 {
		return fmt.Errorf("broker: publish %s: QoS %d: want 0, 1 or 2", m.Topic, m.QoS)
	}
	if err := e.srv.Publish(m.Topic, m.Payload, m.Retain, m.QoS); err != nil {
		return fmt.Errorf("broker: publish %s: %w", m.Topic, err)
	}
	return nil
}

func (e *mochiEngine) subscribe(filter string, fn func(Message)) (func(), error) {
	if err := validFilter(filter); err != nil {
		return nil, fmt.Errorf("broker: subscribe %q: %w", filter, err)
	}
	id := int(e.localSubID.Add(1))
	err := e.srv.Subscribe(filter, id, func(_ *mqttcore.Client, _ packets.Subscription, pk packets.Packet) {
		fn(Message{Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: pk.FixedHeader.Retain})
	})
	if err != nil {
		return nil, fmt.Errorf("broker: subscribe %q: %w", filter, err)
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			_ = e.srv.Unsubscribe(filter, id)
		}
	}, nil
}
