package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Multi-stream MQTT over QUIC on the client side (docs/mqtt-quic.md).
//
// clientMux presents the client's MQTT session, spread over several QUIC
// streams and datagrams, as the one net.Conn the MQTT library reads and
// writes:
//
//   - Write splits what the library writes into packets. A PUBLISH goes
//     on the control stream (StrategyControl), on one client-opened stream
//     per topic (StrategyPerTopic, kept open) or on a new stream per
//     PUBLISH (StrategyPerPublish, finished after the packet); a QoS 0
//     PUBLISH goes as a QUIC datagram when both ends negotiated them and
//     it fits. Everything else goes on the control stream, except the
//     acknowledgements of a delivery that came on a server-opened
//     bidirectional stream (they go back on it) and the PUBREL of a QoS 2
//     PUBLISH sent on a bidirectional data stream (it follows its PUBLISH).
//   - Read merges whole packets from the control stream, from the data
//     streams (acknowledgements, when they are bidirectional), from
//     server-opened streams (deliveries, after their flow header) and from
//     datagrams (QoS 0 deliveries). Packets never interleave inside each
//     other; each stream keeps its order.
//
// Goroutines: one reading the control stream, one per open bidirectional
// data stream and per server-opened stream, one each accepting
// server-opened uni- and bidirectional streams, and one reading datagrams
// when they are enabled. Close ends and waits for all of them.
type clientMux struct {
	*quicConn // the control stream; Read, Write, Close and deadlines are overridden
	cs        QUICClientStreams
	cnt       clientMuxCounters

	ctx    context.Context // ends the goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup
	gmu    sync.Mutex // guards stopped and wg.Add
	stop   bool

	in      chan cmItem // whole packets for Read
	closing chan struct{}
	cOnce   sync.Once

	// Reader state: one reader at a time, like any net.Conn.
	cur  []byte
	rerr error // the control stream ended: sticky

	rdl readDeadline
	dmu sync.Mutex // guards wdl
	wdl time.Time  // applied to data stream writes

	wmu      sync.Mutex // serialises Write and guards the fields below
	wpend    []byte     // the start of a packet not yet written whole
	v5       bool       // CONNECT said MQTT 5
	mqttNext bool       // ALPN MQTT-next: data streams start with a flow header
	nextFlow uint64     // client flow sequence
	topics   map[string]*cmFlow
	order    []string             // per-topic streams, oldest first (for MaxStreams)
	pubrel   map[uint16]*cmFlow   // client packet id -> bidirectional flow of its QoS 2 PUBLISH
	acks     sync.Map             // server packet id (uint16) -> *cmFlow it was delivered on
	dataUsed bool                 // a data stream or datagram was used
	dgRemote bool                 // the broker negotiated datagrams (known once ready)
	flows    map[*cmFlow]struct{} // every open flow, closed with the conn
	// Opened and not yet written (oneAhead): never seen by the broker.
	spareUni  *quic.SendStream
	spareBidi *quic.Stream
}

// cmItem is one or more whole packets, or the end of the control stream.
type cmItem struct {
	b    []byte
	flow *cmFlow // the bidirectional flow it came on; nil: control stream or datagram
	err  error
}

// cmFlow is a data stream the client writes to.
type cmFlow struct {
	mu   sync.Mutex
	send interface {
		io.WriteCloser
		SetWriteDeadline(time.Time) error
	}
	str    *quic.Stream // bidirectional flows
	uni    *quic.SendStream
	broken bool
}

// write writes b whole; dl is the conn's write deadline (zero: none).
func (f *cmFlow) write(b []byte, dl time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return net.ErrClosed
	}
	_ = f.send.SetWriteDeadline(dl)
	if _, err := f.send.Write(b); err != nil {
		f.broken = true
		return err
	}
	return nil
}

func (f *cmFlow) finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = true
	_ = f.send.Close()
}

// Client stream strategies (QUICClientStreams.Strategy), the names of the
// mqtt5 crate's --quic-stream-strategy ("control-only" is accepted for
// StrategyControl).
const (
	StrategyControl    = "control"     // everything on the control stream (default)
	StrategyPerTopic   = "per-topic"   // one client-opened stream per topic, kept open
	StrategyPerPublish = "per-publish" // a new client-opened stream per PUBLISH
)

// QUICClientStreams configure how a QUIC client spreads MQTT over streams
// and datagrams. The zero value is today's single stream.
type QUICClientStreams struct {
	// Strategy: StrategyControl (or ""), StrategyPerTopic or
	// StrategyPerPublish.
	Strategy string
	// Datagrams negotiates QUIC DATAGRAM frames (RFC 9221): QoS 0 PUBLISH
	// packets the client sends leave as datagrams when the broker
	// negotiated them too and the packet fits one (else on the strategy's
	// stream), and the client reads QoS 0 deliveries that come as
	// datagrams.
	Datagrams bool
	// Bidirectional opens data streams bidirectional, so the broker can
	// acknowledge on the PUBLISH's own flow (iotq's broker does). The
	// default is unidirectional, as the mqtt5 crate's client does: its
	// broker takes client bidirectional streams only for flow discards, and
	// acknowledgements then come on the control stream.
	Bidirectional bool
	// MaxStreams bounds the per-topic streams kept open (the oldest is
	// finished to open one more). Default 32, below the brokers' default
	// limit of 100 data streams per connection.
	MaxStreams int
}

// ParseStrategy returns the strategy named s ("control-only" and ""
// are StrategyControl) or an error naming the choices.
func ParseStrategy(s string) (string, error) {
	switch s {
	case "", StrategyControl, "control-only":
		return StrategyControl, nil
	case StrategyPerTopic, StrategyPerPublish:
		return s, nil
	}
	return "", fmt.Errorf("QUIC stream strategy %q: want control, per-topic or per-publish", s)
}

// enabled reports whether the client needs more than one stream.
func (cs QUICClientStreams) enabled() bool {
	return cs.Datagrams || (cs.Strategy != "" && cs.Strategy != StrategyControl && cs.Strategy != "control-only")
}

// clientMuxCounters count multi-stream events of one client connection.
type clientMuxCounters struct {
	dataStreams   atomic.Uint64
	serverStreams atomic.Uint64
	dgSent        atomic.Uint64
	dgTooLarge    atomic.Uint64
	dgReceived    atomic.Uint64
	dgDropped     atomic.Uint64
}

func newClientMux(c *quicConn, cs QUICClientStreams) *clientMux {
	if cs.MaxStreams <= 0 {
		cs.MaxStreams = 32
	}
	if s, err := ParseStrategy(cs.Strategy); err == nil {
		cs.Strategy = s
	}
	ctx, cancel := context.WithCancel(c.conn.Context())
	m := &clientMux{
		quicConn: c, cs: cs, ctx: ctx, cancel: cancel,
		in: make(chan cmItem, 64), closing: make(chan struct{}),
		topics: map[string]*cmFlow{}, pubrel: map[uint16]*cmFlow{}, flows: map[*cmFlow]struct{}{},
	}
	m.wg.Add(3)
	go m.readControl()
	go m.acceptUni()
	go m.acceptBidi()
	if cs.Datagrams {
		m.wg.Add(1)
		go m.readDatagrams()
	}
	return m
}

// goroutine starts f unless Close has begun.
func (m *clientMux) goroutine(f func()) bool {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	if m.stop {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// push queues it for Read; false once Close has begun.
func (m *clientMux) push(it cmItem) bool {
	select {
	case m.in <- it:
		return true
	case <-m.closing:
		return false
	}
}

// readPackets reads r and pushes whole packets (tagged with flow) until r
// ends. skipHeader drops a flow header at the start.
func (m *clientMux) readPackets(r io.Reader, flow *cmFlow, skipHeader bool) error {
	buf := make([]byte, 16<<10)
	var acc []byte
	header := skipHeader
	for {
		n, err := r.Read(buf)
		acc = append(acc, buf[:n]...)
		if header && len(acc) > 0 {
			if isFlowType(acc[0]) {
				_, hn, herr := parseFlowHeader(acc)
				if errors.Is(herr, errShortFlowHeader) && err == nil {
					continue
				}
				if herr != nil {
					return herr
				}
				acc = acc[hn:]
			}
			header = false
		}
		whole, bad := splitPackets(acc, 1<<28+5)
		if bad {
			return errors.New("malformed MQTT packet length")
		}
		if whole > 0 {
			if !m.push(cmItem{b: append([]byte(nil), acc[:whole]...), flow: flow}) {
				return net.ErrClosed
			}
			acc = append(acc[:0], acc[whole:]...)
		}
		if err != nil {
			return err
		}
	}
}

// readControl reads the control stream. After Close began it keeps
// reading and discarding, so the broker's FIN is seen.
func (m *clientMux) readControl() {
	defer m.wg.Done()
	err := m.readPackets(m.quicConn, nil, false)
	if errors.Is(err, net.ErrClosed) {
		_, _ = io.Copy(io.Discard, m.quicConn)
		return
	}
	m.push(cmItem{err: err})
}

func (m *clientMux) acceptUni() {
	defer m.wg.Done()
	for {
		s, err := m.conn.AcceptUniStream(m.ctx)
		if err != nil {
			return
		}
		m.cnt.serverStreams.Add(1)
		if !m.goroutine(func() { _ = m.readPackets(s, nil, true) }) {
			s.CancelRead(0)
			return
		}
	}
}

func (m *clientMux) acceptBidi() {
	defer m.wg.Done()
	for {
		s, err := m.conn.AcceptStream(m.ctx)
		if err != nil {
			return
		}
		m.cnt.serverStreams.Add(1)
		f := &cmFlow{send: s, str: s}
		m.track(f)
		if !m.goroutine(func() {
			_ = m.readPackets(s, f, true)
			m.untrack(f)
			f.finish()
		}) {
			s.CancelRead(0)
			f.finish()
			return
		}
	}
}

func (m *clientMux) track(f *cmFlow) {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	m.flows[f] = struct{}{}
}

func (m *clientMux) untrack(f *cmFlow) {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	delete(m.flows, f)
}

func (m *clientMux) readDatagrams() {
	defer m.wg.Done()
	for {
		b, err := m.conn.ReceiveDatagram(m.ctx)
		if err != nil {
			return
		}
		// One whole QoS 0 PUBLISH per datagram; anything else is dropped.
		if len(b) < 2 || b[0]>>4 != 3 || (b[0]>>1)&3 != 0 || mqttPacketLen(b) != len(b) {
			m.cnt.dgDropped.Add(1)
			continue
		}
		if !m.push(cmItem{b: b}) {
			m.cnt.dgDropped.Add(1)
			return
		}
		m.cnt.dgReceived.Add(1)
	}
}

// Read returns bytes of whole packets in arrival order.
func (m *clientMux) Read(p []byte) (int, error) {
	for len(m.cur) == 0 {
		if m.rerr != nil {
			return 0, m.rerr
		}
		dl, ch := m.rdl.get()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case it := <-m.in:
			if it.err != nil || it.b == nil {
				m.rerr = it.err
				if m.rerr == nil {
					m.rerr = io.EOF
				}
				continue
			}
			if it.flow != nil {
				m.noteDelivery(it.b, it.flow)
			}
			m.cur = it.b
		case <-m.closing:
			return 0, net.ErrClosed
		case <-ch:
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		}
	}
	n := copy(p, m.cur)
	m.cur = m.cur[n:]
	return n, nil
}

// noteDelivery remembers the flow of each QoS 1/2 PUBLISH and PUBREL in
// b (packets from a server-opened bidirectional stream), so the client's
// acknowledgement goes back on it.
func (m *clientMux) noteDelivery(b []byte, f *cmFlow) {
	for len(b) > 0 {
		l := mqttPacketLen(b)
		if l <= 0 || l > len(b) {
			return
		}
		pk := b[:l]
		b = b[l:]
		switch pk[0] >> 4 {
		case 3:
			if p, ok := parsePublish(pk, m.isV5()); ok && p.qos > 0 {
				m.acks.Store(p.id, f)
			}
		case 6: // PUBREL
			if id, ok := mqttPacketID(pk); ok {
				m.acks.Store(id, f)
			}
		}
	}
}

func (m *clientMux) isV5() bool {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.v5
}

func (m *clientMux) SetReadDeadline(t time.Time) error {
	m.rdl.set(t)
	return nil
}

func (m *clientMux) SetWriteDeadline(t time.Time) error {
	m.dmu.Lock()
	m.wdl = t
	m.dmu.Unlock()
	return m.quicConn.SetWriteDeadline(t)
}

func (m *clientMux) writeDeadline() time.Time {
	m.dmu.Lock()
	defer m.dmu.Unlock()
	return m.wdl
}

func (m *clientMux) SetDeadline(t time.Time) error {
	return errors.Join(m.SetReadDeadline(t), m.SetWriteDeadline(t))
}

// Write routes each whole packet of p; the start of a packet p ends inside
// waits for the next Write.
func (m *clientMux) Write(p []byte) (int, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	buf := p
	if len(m.wpend) > 0 {
		m.wpend = append(m.wpend, p...)
		buf = m.wpend
	}
	whole, bad := splitPackets(buf, 1<<28+5)
	if bad {
		whole = len(buf)
	}
	var err error
	var ctl []byte // control stream packets, written together
	for i := 0; i < whole && err == nil; {
		l := mqttPacketLen(buf[i:])
		if bad || l <= 0 {
			l = whole - i
		}
		pk := buf[i : i+l]
		i += l
		if m.routeElsewhere(pk) {
			continue
		}
		if pk[0]>>4 == 14 && m.dataUsed { // DISCONNECT
			if len(ctl) > 0 {
				_, err = m.quicConn.Write(ctl)
				ctl = nil
			}
			m.settleData()
		}
		ctl = append(ctl, pk...)
	}
	if err == nil && len(ctl) > 0 {
		_, err = m.quicConn.Write(ctl)
	}
	if rest := buf[whole:]; len(rest) > 0 {
		m.wpend = append(m.wpend[:0:0], rest...)
	} else {
		m.wpend = m.wpend[:0]
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// settleData finishes the data streams before a DISCONNECT and waits a
// moment: nothing orders QUIC streams, and a broker that read the
// DISCONNECT first would lose what the data streams still carry. wmu must
// be held.
func (m *clientMux) settleData() {
	for _, t := range m.order {
		m.topics[t].finish()
	}
	m.topics, m.order = map[string]*cmFlow{}, nil
	wait := min(2*m.conn.ConnectionStats().SmoothedRTT+10*time.Millisecond, 250*time.Millisecond)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.closing:
	}
}

// routeElsewhere sends pk somewhere other than the control stream and
// returns true, or returns false for the control stream. wmu must be held.
func (m *clientMux) routeElsewhere(pk []byte) bool {
	switch pk[0] >> 4 {
	case 1: // CONNECT: the protocol level is the 7th byte of the variable header
		h := mqttHeaderLen(pk)
		if len(pk) > h+6 {
			m.v5 = pk[h+6] == 5
		}
		return false
	case 3:
		return m.routePublish(pk)
	case 4, 5, 7: // PUBACK, PUBREC, PUBCOMP of a delivery
		id, ok := mqttPacketID(pk)
		if !ok {
			return false
		}
		v, ok := m.acks.Load(id)
		if !ok {
			return false
		}
		if pk[0]>>4 != 5 {
			m.acks.Delete(id)
		}
		return v.(*cmFlow).write(pk, m.writeDeadline()) == nil
	case 6: // PUBREL of our QoS 2 PUBLISH
		id, ok := mqttPacketID(pk)
		if f := m.pubrel[id]; ok && f != nil {
			delete(m.pubrel, id)
			return f.write(pk, m.writeDeadline()) == nil
		}
	}
	return false
}

// ready reports whether data streams may be used: only once the handshake
// completed (0-RTT data stays on the control stream, which moves to the
// 1-RTT connection if 0-RTT is rejected).
func (m *clientMux) ready() bool {
	st, ok := m.stateAfterHandshake() // not ConnectionState: see quicConn.hsState
	if ok {
		m.mqttNext = st.TLS.NegotiatedProtocol == ALPNMQTTNext
		m.dgRemote = st.SupportsDatagrams.Remote
	}
	return ok
}

func (m *clientMux) routePublish(pk []byte) bool {
	if !m.ready() {
		return false
	}
	p, ok := parsePublish(pk, m.v5)
	if !ok || p.alias {
		// An alias must not be used on a stream that may be read before
		// the one that defines it.
		return false
	}
	if p.qos == 0 && m.cs.Datagrams && m.dgRemote {
		err := m.conn.SendDatagram(pk)
		if err == nil {
			m.cnt.dgSent.Add(1)
			m.dataUsed = true
			return true
		}
		if tooLarge := (*quic.DatagramTooLargeError)(nil); errors.As(err, &tooLarge) {
			m.cnt.dgTooLarge.Add(1)
		}
	}
	var f *cmFlow
	switch m.cs.Strategy {
	case StrategyPerTopic:
		f = m.topics[p.topic]
		if f == nil {
			if f = m.openFlow(); f == nil {
				return false
			}
			if len(m.order) >= m.cs.MaxStreams {
				old := m.order[0]
				m.order = m.order[1:]
				m.topics[old].finish()
				delete(m.topics, old)
			}
			m.topics[p.topic] = f
			m.order = append(m.order, p.topic)
		}
	case StrategyPerPublish:
		if f = m.openFlow(); f == nil {
			return false
		}
	default:
		return false
	}
	if err := f.write(pk, m.writeDeadline()); err != nil {
		if m.cs.Strategy == StrategyPerTopic {
			m.dropTopic(p.topic)
		}
		return false // the control stream takes it
	}
	m.dataUsed = true
	if p.qos == 2 && f.str != nil {
		m.pubrel[p.id] = f
	}
	if m.cs.Strategy == StrategyPerPublish {
		if f.str != nil {
			// Finish our side; the reader keeps the stream for the
			// broker's acknowledgements.
			f.mu.Lock()
			_ = f.send.Close()
			f.mu.Unlock()
		} else {
			f.finish()
		}
	}
	return true
}

func (m *clientMux) dropTopic(topic string) {
	delete(m.topics, topic)
	for i, t := range m.order {
		if t == topic {
			m.order = append(m.order[:i:i], m.order[i+1:]...)
			break
		}
	}
}

// openFlow opens a data stream (with a client data flow header when
// MQTT-next was negotiated); nil if the broker allows no more. wmu must be
// held.
func (m *clientMux) openFlow() *cmFlow {
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.HandshakeIdleTimeout)
	defer cancel()
	var f *cmFlow
	if m.cs.Bidirectional {
		s, err := oneAhead(ctx, &m.spareBidi, m.conn.OpenStream, m.conn.OpenStreamSync)
		if err != nil {
			return nil
		}
		f = &cmFlow{send: s, str: s}
		m.track(f)
		if !m.goroutine(func() {
			_ = m.readPackets(s, f, false)
			m.untrack(f)
		}) {
			s.CancelRead(0)
			_ = s.Close()
			return nil
		}
	} else {
		s, err := oneAhead(ctx, &m.spareUni, m.conn.OpenUniStream, m.conn.OpenUniStreamSync)
		if err != nil {
			return nil
		}
		f = &cmFlow{send: s, uni: s}
	}
	m.cnt.dataStreams.Add(1)
	if m.mqttNext {
		m.nextFlow++
		// Flags 0: no optional headers, no persistent state, error
		// tolerance 0, not clean; expire interval 300 s as the mqtt5
		// crate's client.
		if err := f.write(appendFlowHeader(nil, flowTypeClientData, m.nextFlow<<1, 300, 0), m.writeDeadline()); err != nil {
			return nil
		}
	}
	return f
}

// oneAhead returns a stream to use and keeps the next one opened but
// unused in *spare, so the client always holds one stream credit back.
// iotq's broker grants one stream more than its limit so that a client
// past the limit gets a clear refusal instead of waiting for credit; a
// client using every credit would have its last stream refused, and a
// unidirectional stream that is refused after it was finished loses its
// PUBLISH silently. A stream opened but never written stays invisible to
// the broker, and streams open in order, so the one used (the older id)
// never implicitly opens the spare. Without spare credit at the start
// (a broker that allows a single stream) the stream is used at once.
func oneAhead[S any](ctx context.Context, spare **S, open func() (*S, error), openSync func(context.Context) (*S, error)) (*S, error) {
	if *spare == nil {
		first, err := openSync(ctx)
		if err != nil {
			return nil, err
		}
		next, err := open()
		if err != nil {
			return first, nil // no credit to hold back: use it
		}
		*spare = next
		return first, nil
	}
	next, err := openSync(ctx) // waits for credit the broker releases
	if err != nil {
		return nil, err
	}
	s := *spare
	*spare = next
	return s, nil
}

// CloseWithError closes the connection at once (QUICConn).
func (m *clientMux) CloseWithError(code uint64, reason string) error {
	err := m.quicConn.CloseWithError(code, reason)
	m.shutdown()
	return err
}

// Close finishes the data streams, closes the control stream and the
// connection as quicConn does, and waits for the goroutines.
func (m *clientMux) Close() error {
	m.wmu.Lock()
	for _, t := range m.order {
		m.topics[t].finish()
	}
	m.topics, m.order = map[string]*cmFlow{}, nil
	m.wmu.Unlock()
	m.cOnce.Do(func() { close(m.closing) })
	err := m.quicConn.Close()
	m.shutdown()
	return err
}

func (m *clientMux) shutdown() {
	m.cOnce.Do(func() { close(m.closing) })
	m.gmu.Lock()
	m.stop = true
	for f := range m.flows {
		if f.str != nil {
			f.str.CancelRead(0)
		}
	}
	m.gmu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// QUICStats adds the connection's stream and datagram counts.
func (m *clientMux) QUICStats() (QUICStats, bool) {
	st := quicStats(m.conn)
	st.StreamStrategy = m.cs.Strategy
	st0, ok := m.stateAfterHandshake()
	if !ok { // no migration before the handshake: safe to ask quic-go
		st0 = m.conn.ConnectionState()
	}
	ds := st0.SupportsDatagrams
	st.Datagrams = ds.Local && ds.Remote
	st.DataStreams = m.cnt.dataStreams.Load()
	st.ServerStreams = m.cnt.serverStreams.Load()
	st.DatagramsSent = m.cnt.dgSent.Load()
	st.DatagramsTooLarge = m.cnt.dgTooLarge.Load()
	st.DatagramsReceived = m.cnt.dgReceived.Load()
	st.DatagramsDropped = m.cnt.dgDropped.Load()
	return st, true
}
