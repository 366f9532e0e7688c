package broker

import "github.com/iotq/iotq/broker/engine"

// Message is a message of the topic space, as seen by local fronts; its
// one home is package engine.
type Message = engine.Message

// Publish puts m into the topic space as if a client had published it:
// MQTT subscribers (and local ones) receive it, a retained message is kept.
// It is meant for other protocol fronts inside iotq (CoAP): the ACL is not
// applied, the caller authorizes. It may wait (at most max_stall) while a
// subscriber's queue is full, like an MQTT publisher.
func (s *Server) Publish(m Message) error { return s.eng.Publish(m) }

// Subscribe calls fn for every message published on a topic matching the
// MQTT filter, until cancel is called. fn runs on the publisher's goroutine
// and must not block (hand the message to a queue of your own). The ACL is
// not applied.
func (s *Server) Subscribe(filter string, fn func(Message)) (cancel func(), err error) {
	return s.eng.Subscribe(filter, fn)
}
