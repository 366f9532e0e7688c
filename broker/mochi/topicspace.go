package mochi

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"github.com/iotq/iotq/internal/mqttname"
)

// errNoTopic is returned for an empty topic.
var errNoTopic = errors.New("broker: publish: empty topic")

// Publish implements engine.Engine: mqttcore publishes m as its inline
// client would.
func (e *Engine) Publish(m engine.Message) error {
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

// Subscribe implements engine.Engine with an inline-client subscription.
func (e *Engine) Subscribe(filter string, fn func(engine.Message)) (func(), error) {
	if err := mqttname.CheckFilter(filter); err != nil {
		return nil, fmt.Errorf("broker: subscribe %q: %w", filter, err)
	}
	id := int(e.localSubID.Add(1))
	err := e.srv.Subscribe(filter, id, func(_ *mqttcore.Client, _ packets.Subscription, pk packets.Packet) {
		fn(engine.Message{Topic: pk.TopicName, Payload: pk.Payload, QoS: pk.FixedHeader.Qos, Retain: pk.FixedHeader.Retain})
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
