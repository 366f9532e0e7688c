package mqtt

import (
	"log/slog"
	"sync"

	"github.com/iotq/iotq/client/internal/core"
)

// Bounds of an inbox. maxReady is how far the library's receiving
// goroutine may run ahead of the handlers before it waits (back-pressure,
// as when it called the handlers itself). maxHeld and maxHeldBytes bound
// the messages kept for a Subscribe that has not come yet.
const (
	maxReady     = 64
	maxHeld      = 4096
	maxHeldBytes = 64 << 20
)

// inbox is the client's filter table and its one dispatcher goroutine,
// shared by both versions. The MQTT library hands every message to
// deliver, in arrival order, with the function that acknowledges it
// (PUBACK, PUBREC); the library itself acknowledges nothing. A message is
// acknowledged after its handlers returned, never before.
//
// A persistent session's broker sends the messages it queued right after
// CONNACK, before the application can call Subscribe; a message that
// matches no filter yet is held, unacknowledged, and handed over when
// Subscribe registers a matching filter, ahead of later messages on its
// topic. When the held queue is full the message is dropped without an
// acknowledgement: the broker still owns it and sends it again to the
// next connection of the session. So does a message still waiting when
// the client closes.
//
// Acknowledgements leave in the order the handlers got the messages: a
// held message's after those of later messages on other topics (MQTT 4.6
// asks for arrival order, but holding every later acknowledgement behind a
// message that no Subscribe claims would leave the whole session
// unacknowledged).
type inbox struct {
	log *slog.Logger

	mu        sync.Mutex
	cond      *sync.Cond // ready grew or shrank, or stopped
	subs      []sub
	ready     []inMsg // matched a filter: for the dispatcher, in order
	held      []inMsg // matched no filter yet, in arrival order
	heldBytes int
	maxHeld   int
	maxBytes  int
	dropping  bool // the held queue overflowed (logged once per episode)
	stopped   bool

	done chan struct{} // closed when the dispatcher returned
}

type sub struct {
	filter string
	h      core.Handler
}

// inMsg is a received message and its acknowledgement (nil for QoS 0).
type inMsg struct {
	m   core.Message
	ack func()
}

// newInbox starts the dispatcher of a new inbox; stop ends it.
func newInbox(log *slog.Logger, heldMsgs, heldBytes int) *inbox {
	in := &inbox{log: log, maxHeld: heldMsgs, maxBytes: heldBytes, done: make(chan struct{})}
	in.cond = sync.NewCond(&in.mu)
	go in.run()
	return in
}

// deliver takes a message from the MQTT library's receiving goroutine
// (one call at a time, in arrival order). ack, if not nil, acknowledges
// it to the broker; deliver calls it only once the handlers had the
// message. It waits while the dispatcher is maxReady messages behind.
func (in *inbox) deliver(m core.Message, ack func()) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.ready) >= maxReady && !in.stopped {
		in.cond.Wait()
	}
	switch {
	case in.stopped:
		// Not acknowledged: a persistent session gets it again.
	case in.matches(m.Topic):
		in.ready = append(in.ready, inMsg{m, ack})
		in.cond.Broadcast()
	case len(in.held) < in.maxHeld && in.heldBytes+len(m.Payload) <= in.maxBytes:
		in.held = append(in.held, inMsg{m, ack})
		in.heldBytes += len(m.Payload)
		in.log.Debug("message before a matching Subscribe: held unacknowledged", "topic", m.Topic, "qos", m.QoS, "held", len(in.held))
	default:
		if !in.dropping {
			in.dropping = true
			in.log.Warn("messages matching no Subscribe yet fill the held queue: dropping further ones unacknowledged (the broker resends them to the next connection of a persistent session)",
				"topic", m.Topic, "held", len(in.held), "held_bytes", in.heldBytes)
		}
	}
}

// subscribe registers (or replaces) the handler of filter and hands the
// held messages that match it to the dispatcher, in arrival order.
func (in *inbox) subscribe(filter string, h core.Handler) {
	in.mu.Lock()
	defer in.mu.Unlock()
	replaced := false
	for i := range in.subs {
		if in.subs[i].filter == filter {
			in.subs[i].h, replaced = h, true
		}
	}
	if !replaced {
		in.subs = append(in.subs, sub{filter, h})
	}
	kept := in.held[:0]
	for _, x := range in.held {
		if core.MatchTopic(filter, x.m.Topic) {
			in.ready = append(in.ready, x)
			in.heldBytes -= len(x.m.Payload)
		} else {
			kept = append(kept, x)
		}
	}
	clear(in.held[len(kept):])
	in.held = kept
	in.dropping = in.dropping && len(in.held) >= in.maxHeld
	in.cond.Broadcast()
}

// matches reports whether a filter matches topic; in.mu held.
func (in *inbox) matches(topic string) bool {
	for _, x := range in.subs {
		if core.MatchTopic(x.filter, topic) {
			return true
		}
	}
	return false
}

// run is the dispatcher: it passes each ready message to every matching
// handler, then acknowledges it.
func (in *inbox) run() {
	defer close(in.done)
	var hs []core.Handler
	for {
		in.mu.Lock()
		for len(in.ready) == 0 && !in.stopped {
			in.cond.Wait()
		}
		if in.stopped {
			in.mu.Unlock()
			return
		}
		x := in.ready[0]
		in.ready[0] = inMsg{}
		in.ready = in.ready[1:]
		hs = hs[:0]
		for _, s := range in.subs {
			if core.MatchTopic(s.filter, x.m.Topic) {
				hs = append(hs, s.h)
			}
		}
		in.cond.Broadcast() // room for deliver
		in.mu.Unlock()
		for _, h := range hs {
			h(x.m)
		}
		if x.ack != nil {
			x.ack()
		}
	}
}

// stop ends the dispatcher after the handler it is running, if any, and
// waits for it; messages not yet handed over stay unacknowledged, and a
// deliver waiting for room returns. Idempotent.
func (in *inbox) stop() {
	in.mu.Lock()
	in.stopped = true
	in.ready, in.held = nil, nil
	in.cond.Broadcast()
	in.mu.Unlock()
	<-in.done
}
