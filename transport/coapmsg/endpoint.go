package coapmsg

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
	"github.com/plgd-dev/go-coap/v3/udp/coder"
)

// Errors reported to Send's completion callback.
var (
	// ErrTimeout: a confirmable message was retransmitted MAX_RETRANSMIT
	// times and never acknowledged. The message counts as lost.
	ErrTimeout = errors.New("coap: no acknowledgement, retransmissions exhausted")
	// ErrReset: the peer rejected the message with RST.
	ErrReset = errors.New("coap: peer rejected the message (RST)")
	// ErrClosed: the endpoint was closed before the outcome was known.
	ErrClosed = errors.New("coap: endpoint closed")
)

// Handler answers a request (CON or NON) from peer. The returned message's
// Code, Options and Payload form the response; Type, MessageID and Token are
// set by the endpoint (piggy-backed on the ACK for a CON request, a NON
// response for a NON request). nil: no response (an empty ACK for CON).
// Requests of one peer are handled one at a time, in arrival order; a
// Handler may block briefly (it delays only that peer).
type Handler func(peer net.Addr, req *message.Message) *message.Message

// Options configure an Endpoint. The zero value is a client endpoint with
// RFC 7252 defaults.
type Options struct {
	// Params are the transmission parameters; zero fields mean RFC defaults.
	Params Params
	// Handler serves incoming requests. nil: requests are rejected with RST
	// (a pure client).
	Handler Handler
	// PeerQueue bounds the requests of one peer waiting for the Handler;
	// beyond it CON requests get 5.03 Service Unavailable and NON requests
	// are dropped (both counted as Overload). Default 64.
	PeerQueue int
	// MaxDatagram is the receive buffer size. Default 65535.
	MaxDatagram int
	// MaxDedup bounds the remembered message IDs (deduplication); beyond
	// it new messages are processed without being remembered (counted as
	// DedupFull), so a flood of distinct message IDs cannot exhaust memory.
	// Default 200000.
	MaxDedup int
	// Clock is the time source. Default: the system clock.
	Clock Clock
	// Rand returns numbers uniform in [0, 1) for the dithering of timeouts.
	// Default: math/rand/v2.
	Rand func() float64
	// Logger receives debug logs. nil: discard.
	Logger *slog.Logger
	// OnReset, if set, is called (on the read goroutine; must not block)
	// for an RST that matches no outstanding CON message, e.g. a client
	// rejecting a NON notification (RFC 7641 section 3.6).
	OnReset func(peer net.Addr, mid uint16)
}

// Stats are the endpoint's counters since it started.
type Stats struct {
	Sent            int64 // datagrams written (including retransmissions, ACKs, RSTs)
	Received        int64 // datagrams read
	Retransmissions int64 // CON retransmissions
	Acknowledged    int64 // CON messages acknowledged
	Timeouts        int64 // CON messages that exhausted MAX_RETRANSMIT
	ResetsReceived  int64 // RST received for one of our CON messages
	ResetsSent      int64 // RST sent (rejected messages, pings)
	Duplicates      int64 // duplicate CON/NON messages received (deduplicated)
	BadDatagrams    int64 // datagrams that are not CoAP messages (format errors)
	BadOptions      int64 // messages with unknown critical options
	Overload        int64 // requests refused because the peer's queue was full
	Stray           int64 // ACK/RST/responses matching nothing of ours
	DedupFull       int64 // messages not remembered because the deduplication table was full
}

type counters struct {
	sent, received, retransmissions, acknowledged, timeouts, resetsReceived, resetsSent,
	duplicates, badDatagrams, badOptions, overload, stray, dedupFull atomic.Int64
}

type midKey struct {
	peer string
	mid  uint16
}

// exchange is one outgoing confirmable message.
type exchange struct {
	peer     net.Addr
	key      midKey
	data     []byte
	first    time.Time
	timeout  time.Duration
	retrans  int
	timer    Timer
	finished bool
	done     func(ack *message.Message, err error)
}

type request struct {
	peer net.Addr
	msg  *message.Message
	con  bool
	key  midKey
}

type peerState struct {
	active  int         // outstanding CON messages (NSTART)
	queue   []*exchange // CON messages waiting for NSTART
	reqs    []request   // requests waiting for the handler
	working bool        // a goroutine drains reqs
}

type seenEntry struct {
	expires time.Time
	reply   []byte // response to a CON (ACK), resent on duplicates
}

// Endpoint is one CoAP message-layer endpoint on a datagram socket.
type Endpoint struct {
	conn  net.PacketConn
	o     Options
	p     Params
	clock Clock
	rto   rtoPolicy
	log   *slog.Logger
	c     counters

	mu     sync.Mutex
	closed bool
	mid    uint16
	out    map[midKey]*exchange
	peers  map[string]*peerState
	tokens map[string]func(*message.Message)
	seen   map[midKey]*seenEntry
	sweep  Timer

	wg sync.WaitGroup
}

// New starts an endpoint on conn, which it owns from now on (Close closes
// it).
func New(conn net.PacketConn, o Options) (*Endpoint, error) {
	if err := o.Params.Validate(); err != nil {
		return nil, fmt.Errorf("coap parameters: %w", err)
	}
	if o.PeerQueue <= 0 {
		o.PeerQueue = 64
	}
	if o.MaxDatagram <= 0 {
		o.MaxDatagram = 65535
	}
	if o.MaxDedup <= 0 {
		o.MaxDedup = 200000
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Endpoint{
		conn: conn, o: o, p: o.Params.WithDefaults(), clock: o.Clock, log: o.Logger,
		mid:    uint16(rand.Uint32()),
		out:    map[midKey]*exchange{},
		peers:  map[string]*peerState{},
		tokens: map[string]func(*message.Message){},
		seen:   map[midKey]*seenEntry{},
	}
	if e.p.CoCoA {
		e.rto = newCocoa(e.p, o.Rand, e.clock.Now)
	} else {
		e.rto = rfcPolicy{p: e.p, rand: o.Rand}
	}
	e.mu.Lock()
	e.scheduleSweep()
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.readLoop()
	}()
	return e, nil
}

// Params returns the effective transmission parameters.
func (e *Endpoint) Params() Params { return e.p }

// LocalAddr is the socket's address.
func (e *Endpoint) LocalAddr() net.Addr { return e.conn.LocalAddr() }

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	c := &e.c
	return Stats{
		Sent: c.sent.Load(), Received: c.received.Load(), Retransmissions: c.retransmissions.Load(),
		Acknowledged: c.acknowledged.Load(), Timeouts: c.timeouts.Load(), ResetsReceived: c.resetsReceived.Load(),
		ResetsSent: c.resetsSent.Load(), Duplicates: c.duplicates.Load(), BadDatagrams: c.badDatagrams.Load(),
		BadOptions: c.badOptions.Load(), Overload: c.overload.Load(), Stray: c.stray.Load(),
		DedupFull: c.dedupFull.Load(),
	}
}

// NewToken returns a random 8-byte token.
func NewToken() message.Token {
	t := make(message.Token, 8)
	v := rand.Uint64()
	for i := range t {
		t[i] = byte(v >> (8 * i))
	}
	return t
}

// Send transmits m to peer. m.Type must be message.Confirmable or
// message.NonConfirmable; the endpoint assigns the message ID. For a NON
// message done(nil, err) is called once it was written. For a CON message
// done is called once with the ACK (which may carry a piggy-backed
// response), or with ErrReset, ErrTimeout (retransmissions exhausted) or
// ErrClosed. A CON message waits while NSTART messages to the same peer are
// outstanding. done may be nil; it runs on an endpoint goroutine and must
// not block. Send fails at once (and done is not called) if m cannot be
// encoded or the endpoint is closed.
func (e *Endpoint) Send(peer net.Addr, m *message.Message, done func(ack *message.Message, err error)) error {
	if m.Type != message.Confirmable && m.Type != message.NonConfirmable {
		return fmt.Errorf("coap: Send needs a CON or NON message, got type %v", m.Type)
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.mid++
	m.MessageID = int32(e.mid)
	data, err := encode(m)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	if m.Type == message.NonConfirmable {
		_, werr := e.write(data, peer)
		e.mu.Unlock()
		if done != nil {
			done(nil, werr)
		}
		return nil
	}
	ex := &exchange{peer: peer, key: midKey{peer.String(), e.mid}, data: data, done: done}
	ps := e.peer(ex.key.peer)
	if ps.active < e.p.NStart {
		ps.active++
		e.start(ex)
	} else {
		ps.queue = append(ps.queue, ex)
	}
	e.mu.Unlock()
	return nil
}

// HandleToken routes responses and notifications from peer carrying token
// to h (in arrival order, on the read goroutine; h must not block) until
// cancel is called. A confirmable response is acknowledged before h runs.
func (e *Endpoint) HandleToken(peer net.Addr, token message.Token, h func(*message.Message)) (cancel func()) {
	k := peer.String() + "|" + string(token)
	e.mu.Lock()
	e.tokens[k] = h
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.tokens, k)
		e.mu.Unlock()
	}
}

// Close fails outstanding messages with ErrClosed, closes the socket and
// waits for the endpoint's goroutines. Idempotent.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.wg.Wait()
		return nil
	}
	e.closed = true
	if e.sweep != nil {
		e.sweep.Stop()
	}
	var cbs []func()
	for _, ex := range e.out {
		cbs = append(cbs, e.finish(ex, nil, ErrClosed)...)
	}
	for _, ps := range e.peers {
		for _, ex := range ps.queue {
			if ex.done != nil {
				cbs = append(cbs, func() { ex.done(nil, ErrClosed) })
			}
		}
		ps.queue = nil
	}
	e.mu.Unlock()
	err := e.conn.Close()
	e.wg.Wait()
	for _, f := range cbs {
		f()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("coap: close socket: %w", err)
	}
	return nil
}

func (e *Endpoint) peer(name string) *peerState {
	ps := e.peers[name]
	if ps == nil {
		ps = &peerState{}
		e.peers[name] = ps
	}
	return ps
}

// write sends one datagram. Called with e.mu held.
func (e *Endpoint) write(data []byte, peer net.Addr) (int, error) {
	e.c.sent.Add(1)
	n, err := e.conn.WriteTo(data, peer)
	if err != nil {
		return n, fmt.Errorf("coap: write to %s: %w", peer, err)
	}
	return n, nil
}

// start transmits ex for the first time. Called with e.mu held.
func (e *Endpoint) start(ex *exchange) {
	ex.first = e.clock.Now()
	ex.timeout = e.rto.initial(ex.key.peer)
	e.out[ex.key] = ex
	if _, err := e.write(ex.data, ex.peer); err != nil {
		e.log.Debug("coap send failed; retransmission will retry", "peer", ex.peer, "error", err)
	}
	ex.timer = e.clock.AfterFunc(ex.timeout, func() { e.fire(ex) })
}

// fire handles the expiry of ex's retransmission timer.
func (e *Endpoint) fire(ex *exchange) {
	e.mu.Lock()
	if ex.finished || e.closed {
		e.mu.Unlock()
		return
	}
	if ex.retrans >= e.p.MaxRetransmit {
		e.c.timeouts.Add(1)
		err := fmt.Errorf("%w: %d retransmissions to %s, gave up after %s", ErrTimeout, ex.retrans, ex.peer,
			e.clock.Now().Sub(ex.first).Round(time.Millisecond))
		cbs := e.finish(ex, nil, err)
		e.mu.Unlock()
		run(cbs)
		return
	}
	ex.retrans++
	ex.timeout = e.rto.next(ex.key.peer, ex.timeout)
	e.c.retransmissions.Add(1)
	if _, err := e.write(ex.data, ex.peer); err != nil {
		e.log.Debug("coap retransmission failed", "peer", ex.peer, "error", err)
	}
	ex.timer = e.clock.AfterFunc(ex.timeout, func() { e.fire(ex) })
	e.mu.Unlock()
}

// finish ends ex and starts the next queued message of its peer. Called with
// e.mu held; returns callbacks to run after unlocking.
func (e *Endpoint) finish(ex *exchange, ack *message.Message, err error) []func() {
	ex.finished = true
	if ex.timer != nil {
		ex.timer.Stop()
	}
	delete(e.out, ex.key)
	var cbs []func()
	if ex.done != nil {
		cbs = append(cbs, func() { ex.done(ack, err) })
	}
	ps := e.peer(ex.key.peer)
	ps.active--
	if !e.closed && len(ps.queue) > 0 {
		next := ps.queue[0]
		ps.queue = ps.queue[1:]
		ps.active++
		e.start(next)
	}
	if ps.active == 0 && len(ps.queue) == 0 && len(ps.reqs) == 0 && !ps.working {
		delete(e.peers, ex.key.peer)
	}
	return cbs
}

func run(cbs []func()) {
	for _, f := range cbs {
		f()
	}
}

func (e *Endpoint) readLoop() {
	buf := make([]byte, e.o.MaxDatagram)
	for {
		n, addr, err := e.conn.ReadFrom(buf)
		if err != nil {
			e.mu.Lock()
			closed := e.closed
			e.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			e.log.Debug("coap read failed", "error", err)
			time.Sleep(10 * time.Millisecond) // e.g. ICMP port unreachable on a connected socket
			continue
		}
		e.c.received.Add(1)
		data := make([]byte, n)
		copy(data, buf[:n])
		e.receive(addr, data)
	}
}

// receive processes one datagram from peer.
func (e *Endpoint) receive(peer net.Addr, data []byte) {
	msg := &message.Message{Options: make(message.Options, 0, 32)}
	if _, err := coder.DefaultCoder.Decode(data, msg); err != nil {
		e.c.badDatagrams.Add(1)
		e.log.Debug("coap: bad datagram", "peer", peer, "error", err)
		// A confirmable message with a format error is rejected (RFC 7252
		// section 4.2); anything else is silently ignored.
		if len(data) >= 4 && data[0]>>6 == 1 && message.Type((data[0]>>4)&3) == message.Confirmable {
			e.reset(peer, uint16(data[2])<<8|uint16(data[3]))
		}
		return
	}
	key := midKey{peer.String(), uint16(msg.MessageID)}
	switch msg.Type {
	case message.Acknowledgement, message.Reset:
		e.mu.Lock()
		ex := e.out[key]
		if ex == nil {
			e.mu.Unlock()
			e.c.stray.Add(1)
			if msg.Type == message.Reset && e.o.OnReset != nil {
				e.o.OnReset(peer, key.mid)
			}
			return
		}
		var cbs []func()
		if msg.Type == message.Reset {
			e.c.resetsReceived.Add(1)
			cbs = e.finish(ex, nil, ErrReset)
		} else {
			e.c.acknowledged.Add(1)
			now := e.clock.Now()
			e.rto.acknowledged(key.peer, now.Sub(ex.first), ex.retrans, now)
			cbs = e.finish(ex, msg, nil)
			if msg.Code != codes.Empty {
				if h := e.tokens[key.peer+"|"+string(msg.Token)]; h != nil {
					cbs = append(cbs, func() { h(msg) })
				}
			}
		}
		e.mu.Unlock()
		run(cbs)
		return
	}
	con := msg.Type == message.Confirmable
	if msg.Code == codes.Empty {
		if con { // CoAP ping
			e.reset(peer, key.mid)
		}
		return
	}
	// Deduplication.
	e.mu.Lock()
	if s := e.seen[key]; s != nil {
		e.c.duplicates.Add(1)
		if con && s.reply != nil {
			_, _ = e.write(s.reply, peer)
		}
		e.mu.Unlock()
		return
	}
	life := e.p.NonLifetime
	if con {
		life = e.p.ExchangeLifetime
	}
	se := &seenEntry{expires: e.clock.Now().Add(life)}
	if len(e.seen) < e.o.MaxDedup {
		e.seen[key] = se
	} else {
		e.c.dedupFull.Add(1)
	}
	e.mu.Unlock()

	class := msg.Code >> 5
	switch {
	case class == 0: // request
		if unknownCritical(msg.Options) {
			e.c.badOptions.Add(1)
			if con {
				e.reply(peer, key, se, &message.Message{Code: codes.BadOption, Token: msg.Token,
					Payload: []byte("unrecognized critical option")})
			} else {
				e.reset(peer, key.mid)
			}
			return
		}
		if e.o.Handler == nil {
			e.reset(peer, key.mid)
			return
		}
		e.enqueue(request{peer: peer, msg: msg, con: con, key: key})
	case class >= 2 && class <= 5: // response
		e.mu.Lock()
		h := e.tokens[key.peer+"|"+string(msg.Token)]
		e.mu.Unlock()
		if h == nil || unknownCritical(msg.Options) {
			if h != nil {
				e.c.badOptions.Add(1)
			} else {
				e.c.stray.Add(1)
			}
			// Unknown token: reject, which also cancels an observation the
			// server still holds (RFC 7641 section 3.6).
			e.reset(peer, key.mid)
			return
		}
		if con {
			e.reply(peer, key, se, &message.Message{Code: codes.Empty})
		}
		h(msg)
	default: // 1.xx, 6.xx, 7.xx: not valid on UDP
		e.c.badDatagrams.Add(1)
		e.reset(peer, key.mid)
	}
}

// reply sends r as the ACK of the CON message key (or as a NON response when
// se is nil) and remembers it for duplicates.
func (e *Endpoint) reply(peer net.Addr, key midKey, se *seenEntry, r *message.Message) {
	r.Type = message.Acknowledgement
	r.MessageID = int32(key.mid)
	data, err := encode(r)
	if err != nil {
		e.log.Warn("coap: cannot encode response", "error", err)
		r.Code, r.Options, r.Payload = codes.InternalServerError, nil, nil
		data, _ = encode(r)
	}
	e.mu.Lock()
	if se != nil {
		se.reply = data
	}
	_, _ = e.write(data, peer)
	e.mu.Unlock()
}

func (e *Endpoint) reset(peer net.Addr, mid uint16) {
	data, _ := encode(&message.Message{Type: message.Reset, Code: codes.Empty, MessageID: int32(mid)})
	e.c.resetsSent.Add(1)
	e.mu.Lock()
	_, _ = e.write(data, peer)
	e.mu.Unlock()
}

// enqueue hands a request to its peer's handler goroutine.
func (e *Endpoint) enqueue(r request) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	ps := e.peer(r.key.peer)
	if len(ps.reqs) >= e.o.PeerQueue {
		e.mu.Unlock()
		e.c.overload.Add(1)
		if r.con {
			e.mu.Lock()
			se := e.seen[r.key]
			e.mu.Unlock()
			maxAge := message.Option{ID: message.MaxAge, Value: []byte{1}}
			e.reply(r.peer, r.key, se, &message.Message{Code: codes.ServiceUnavailable, Token: r.msg.Token,
				Options: message.Options{maxAge}})
		}
		return
	}
	ps.reqs = append(ps.reqs, r)
	if !ps.working {
		ps.working = true
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.work(r.key.peer)
		}()
	}
	e.mu.Unlock()
}

func (e *Endpoint) work(name string) {
	for {
		e.mu.Lock()
		ps := e.peers[name]
		if ps == nil || len(ps.reqs) == 0 || e.closed {
			if ps != nil {
				ps.working = false
				ps.reqs = nil
				if ps.active == 0 && len(ps.queue) == 0 {
					delete(e.peers, name)
				}
			}
			e.mu.Unlock()
			return
		}
		r := ps.reqs[0]
		ps.reqs = ps.reqs[1:]
		e.mu.Unlock()

		resp := e.o.Handler(r.peer, r.msg)
		if r.con {
			e.mu.Lock()
			se := e.seen[r.key]
			e.mu.Unlock()
			if resp == nil {
				resp = &message.Message{Code: codes.Empty}
			} else {
				resp.Token = r.msg.Token
			}
			e.reply(r.peer, r.key, se, resp)
		} else if resp != nil {
			resp.Type = message.NonConfirmable
			resp.Token = r.msg.Token
			_ = e.Send(r.peer, resp, nil)
		}
	}
}

// scheduleSweep arms the timer that forgets expired message IDs. Called with
// e.mu held.
func (e *Endpoint) scheduleSweep() {
	every := min(e.p.NonLifetime, e.p.ExchangeLifetime) / 4
	every = max(every, 100*time.Millisecond)
	e.sweep = e.clock.AfterFunc(every, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			return
		}
		now := e.clock.Now()
		for k, s := range e.seen {
			if now.After(s.expires) {
				delete(e.seen, k)
			}
		}
		e.scheduleSweep()
	})
}

// unknownCritical reports whether opts hold a critical (odd-numbered) option
// this implementation does not know (RFC 7252 section 5.4.1).
func unknownCritical(opts message.Options) bool {
	for _, o := range opts {
		if o.ID&1 == 1 {
			if _, known := message.CoapOptionDefs[o.ID]; !known {
				return true
			}
		}
	}
	return false
}

func encode(m *message.Message) ([]byte, error) {
	n, err := coder.DefaultCoder.Size(*m)
	if err != nil {
		return nil, fmt.Errorf("coap: encode message: %w", err)
	}
	buf := make([]byte, n)
	if _, err := coder.DefaultCoder.Encode(*m, buf); err != nil {
		return nil, fmt.Errorf("coap: encode message: %w", err)
	}
	return buf, nil
}

// Decode parses one CoAP-over-UDP datagram.
func Decode(data []byte) (*message.Message, error) {
	m := &message.Message{Options: make(message.Options, 0, 32)}
	if _, err := coder.DefaultCoder.Decode(data, m); err != nil {
		return nil, fmt.Errorf("coap: decode datagram: %w", err)
	}
	return m, nil
}

// Encode serialises m as a CoAP-over-UDP datagram.
func Encode(m *message.Message) ([]byte, error) { return encode(m) }
