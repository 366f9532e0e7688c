package coapfront

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapmsg"
)

// sink is where an observer's notifications go: a UDP/DTLS peer through the
// message layer, or a reliable stream (RFC 8323).
type sink interface {
	// key identifies the client connection (peer address or stream).
	key() string
	// send transmits a notification; done reports its outcome (nil for
	// NON and stream writes once written).
	send(m *message.Message, confirmable bool, done func(error)) (mid uint16, err error)
	// confirmable reports whether the registration asked for reliability.
	confirmable() bool
	// counters are the counters of the sink's transport.
	counters() *transportCounters
}

type udpSink struct {
	f  *Front
	ep *coapmsg.Endpoint
	// local names the socket the peer talks to (scheme and bound
	// address): one host:port is a different endpoint on each listener,
	// such as a coap:// client and a later coaps:// client that the
	// kernel gave the same source port.
	local string
	peer  net.Addr
	con   bool
	tc    *transportCounters
}

func datagramKey(local string, peer net.Addr) string { return "udp|" + local + "|" + peer.String() }

func (u *udpSink) key() string                  { return datagramKey(u.local, u.peer) }
func (u *udpSink) counters() *transportCounters { return u.tc }
func (u *udpSink) confirmable() bool            { return u.con }
func (u *udpSink) send(m *message.Message, con bool, done func(error)) (uint16, error) {
	m.Type = message.NonConfirmable
	if con {
		m.Type = message.Confirmable
	}
	err := u.ep.Send(u.peer, m, func(_ *message.Message, err error) { done(err) })
	return uint16(m.MessageID), err
}

// observer is one observation (RFC 7641): a client, a token, a topic.
type observer struct {
	sink    sink
	token   message.Token
	topic   string
	key     string // obsKey: sink and token
	mu      sync.Mutex
	busy    bool             // a CON notification is outstanding
	pending *message.Message // newest value waiting for it (older ones coalesced)
	lastCON time.Time
	check   time.Duration // longest time between two CON notifications
	via     *psTopic      // the topic-data resource registered on (nil: direct form)
	reg     uint64        // registration order (Front.regs): lowering max-subscribers drops the newest
	mids    [8]uint16     // recent NON notification message IDs (RST matching)
	nmid    int
	gone    atomic.Bool
}

func obsKey(s sink, token message.Token) string { return s.key() + "|" + string(token) }

// register adds (or replaces) the observation of sink+token on topic and
// returns the Observe sequence number for the registration response. via
// is the topic-data resource registered on (nil: the direct form); ok is
// false when its max-subscribers observers are there already (a
// re-registration of one of them is not refused).
func (f *Front) register(s sink, topic string, token message.Token, via *psTopic) (seq uint32, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := obsKey(s, token)
	if old := f.byKey[k]; old != nil {
		f.removeLocked(old)
	}
	maxSubs, check := f.limitsLocked(via)
	set := f.observers[topic]
	if maxSubs >= 0 {
		n := 0
		for o := range set {
			if o.via == via {
				n++
			}
		}
		if n >= maxSubs {
			return 0, false
		}
	}
	if set == nil {
		set = map[*observer]struct{}{}
		f.observers[topic] = set
	}
	f.regs++
	o := &observer{sink: s, token: token, topic: topic, lastCON: time.Now(), key: k, check: check, via: via, reg: f.regs}
	set[o] = struct{}{}
	f.byKey[k] = o
	return f.nextSeq(), true
}

func (f *Front) nextSeq() uint32 { return f.seq.Add(1) & 0xffffff }

func (f *Front) deregister(s sink, topic string, token message.Token) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o := f.byKey[obsKey(s, token)]; o != nil && o.topic == topic {
		f.removeLocked(o)
	}
}

// removeLocked ends observation o. Called with f.mu held.
func (f *Front) removeLocked(o *observer) {
	o.gone.Store(true)
	if f.byKey[o.key] == o {
		delete(f.byKey, o.key)
	}
	if set := f.observers[o.topic]; set != nil {
		delete(set, o)
		if len(set) == 0 {
			delete(f.observers, o.topic)
		}
	}
}

// dropSink ends every observation of a client (stream closed).
func (f *Front) dropSink(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.observers {
		for o := range set {
			if o.sink.key() == key {
				f.removeLocked(o)
			}
		}
	}
}

// onReset removes the observer whose NON notification peer rejected on
// the socket named local.
func (f *Front) onReset(local string, peer net.Addr, mid uint16) {
	key := datagramKey(local, peer)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.observers {
		for o := range set {
			if o.sink.key() != key {
				continue
			}
			o.mu.Lock()
			hit := false
			for _, m := range o.mids {
				hit = hit || (m == mid && o.nmid > 0)
			}
			o.mu.Unlock()
			if hit {
				f.removeLocked(o)
				return
			}
		}
	}
	f.earlyRST[f.nEarlyRST%len(f.earlyRST)] = struct {
		peer string
		mid  uint16
	}{key, mid}
	f.nEarlyRST++
}

// rejectedEarlyLocked reports (once) whether sink key's RST for mid arrived
// before the notification's message ID was recorded. Called with f.mu held.
func (f *Front) rejectedEarlyLocked(key string, mid uint16) bool {
	for i := range min(f.nEarlyRST, len(f.earlyRST)) {
		if r := &f.earlyRST[i]; r.peer == key && r.mid == mid {
			r.peer = "" // used up
			return true
		}
	}
	return false
}

// notify sends the observer a notification with code and payload. A final
// code (not 2.05) ends the observation.
func (o *observer) notify(f *Front, code codes.Code, payload []byte) {
	m := &message.Message{Code: code, Token: o.token}
	if code == codes.Content {
		m = f.content(&message.Message{}, payload)
		m.Token = o.token
		addUint(m, message.Observe, f.nextSeq())
		if cf, ok := f.contentFormatOf(o.via); ok {
			addUint(m, message.ContentFormat, cf)
		}
	}
	o.mu.Lock()
	if o.gone.Load() && code == codes.Content {
		o.mu.Unlock()
		return
	}
	if o.busy {
		if o.pending != nil {
			f.coalesced.Add(1)
		}
		o.pending = m
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	o.transmit(f, m)
}

func (o *observer) transmit(f *Front, m *message.Message) {
	con := false
	switch f.o.Notifications {
	case NotifyCON:
		con = true
	case NotifyMatch:
		con = o.sink.confirmable()
	}
	o.mu.Lock()
	if !con && time.Since(o.lastCON) >= o.check {
		con = true
	}
	if con {
		o.busy = true
		o.lastCON = time.Now()
	}
	o.mu.Unlock()
	f.notifications.Add(1)
	o.sink.counters().notifications.Add(1)
	mid, err := o.sink.send(m, con, func(err error) {
		if !con {
			return
		}
		if err != nil {
			f.notifyFailures.Add(1)
			o.sink.counters().notifyFailures.Add(1)
			f.mu.Lock()
			f.removeLocked(o)
			f.mu.Unlock()
			return
		}
		o.mu.Lock()
		next := o.pending
		o.pending, o.busy = nil, false
		gone := o.gone.Load()
		o.mu.Unlock()
		if next != nil && !gone {
			o.transmit(f, next)
		}
	})
	if err != nil || con {
		o.mu.Lock()
		if err != nil {
			o.busy = false
		}
		o.mu.Unlock()
		return
	}
	// A NON notification: remember its message ID so that an RST for it
	// ends the observation. The RST may already have been read (loopback,
	// or this goroutine descheduled after the write): onReset then left
	// it in f.earlyRST. Both run under f.mu, so one of them sees the other.
	f.mu.Lock()
	o.mu.Lock()
	o.mids[o.nmid%len(o.mids)] = mid
	o.nmid++
	o.mu.Unlock()
	if f.rejectedEarlyLocked(o.sink.key(), mid) {
		f.removeLocked(o)
	}
	f.mu.Unlock()
}
