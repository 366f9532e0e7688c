package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/internal/mqttname"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// timedConn is the transport connection as paho sees it: writes are
// serialised, and the time of the first successful read (the CONNACK, which
// is the first thing a broker sends) is recorded.
type timedConn struct {
	transport.Conn
	wmu       sync.Mutex
	firstRead atomic.Int64 // Unix ns, 0 until the first byte arrived
	cache     *transport.FileSessionCache
	early     []byte       // PUBLISH appended to the first write (CONNECT); wmu
	earlySent atomic.Int64 // Unix ns when early was written
	earlyMsg  *core.EarlyMessage
	// watch takes the early QoS 1 PUBLISH's PUBACK out of the incoming
	// stream; nil when there is none. Used by the reading goroutine only.
	watch *ackWatch
}

// packetConn is the connection handed to paho.golang, which writes a packet
// as several Write calls while holding the conn's sync.Locker. packetConn is
// that Locker, and gathers the pieces of one MQTT packet (it knows the
// length from the fixed header) into a single Write of the transport: one
// packet leaves in one TCP segment or QUIC STREAM frame as with paho for
// 3.1.1, and the Write that completes the packet returns the real error.
// Write must only be called between Lock and Unlock (paho.golang does so).
type packetConn struct {
	*timedConn
	mu  sync.Mutex
	buf []byte
}

func (c *packetConn) Lock() { c.mu.Lock() }

func (c *packetConn) Unlock() {
	if len(c.buf) > 0 { // an incomplete packet: pass on what we have
		_, _ = c.timedConn.Write(c.buf)
		c.buf = c.buf[:0]
	}
	c.mu.Unlock()
}

func (c *packetConn) Write(b []byte) (int, error) {
	c.buf = append(c.buf, b...)
	if need, ok := mqttPacketLen(c.buf); ok && len(c.buf) < need {
		return len(b), nil
	}
	_, err := c.timedConn.Write(c.buf)
	c.buf = c.buf[:0]
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// mqttPacketLen returns the total length of the MQTT packet that starts b,
// once its fixed header is complete.
func mqttPacketLen(b []byte) (int, bool) {
	n, mul := 0, 1
	for i := 1; i < len(b) && i <= 4; i++ {
		n += int(b[i]&0x7f) * mul
		if b[i]&0x80 == 0 {
			return 1 + i + n, true
		}
		mul *= 128
	}
	return 0, false
}

func (c *timedConn) Read(b []byte) (int, error) {
	if c.watch != nil {
		return c.watch.read(c.rawRead, b)
	}
	return c.rawRead(b)
}

func (c *timedConn) rawRead(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.firstRead.Load() == 0 {
		c.firstRead.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
}

// ackWatch splits the incoming byte stream into MQTT packets until the
// PUBACK of the early QoS 1 PUBLISH (packet id core.EarlyPacketID) has
// come: that one completes the early message's receipt and is not passed
// on (the MQTT library never sent that packet id and would treat it as a
// protocol error); every other byte is passed on unchanged. Afterwards
// reads go straight through.
type ackWatch struct {
	m    *core.EarlyMessage
	v5   bool
	in   []byte // read from the transport, not yet a whole packet
	out  []byte // for the caller
	err  error  // the transport's read error, returned once out is empty
	at   time.Time
	done bool
}

func (w *ackWatch) read(raw func([]byte) (int, error), b []byte) (int, error) {
	for len(w.out) == 0 {
		if w.done {
			if len(w.in) > 0 {
				w.out, w.in = w.in, nil
				break
			}
			if w.err != nil {
				return 0, w.err
			}
			return raw(b)
		}
		n, ok := mqttPacketLen(w.in)
		if !ok && len(w.in) >= 5 { // not MQTT framing: leave it to the library
			w.m.Complete(time.Now(), fmt.Errorf("early publish %s: malformed packet from the broker", w.m.Topic))
			w.done = true
			continue
		}
		if ok && len(w.in) >= n {
			pkt := w.in[:n:n]
			w.in = w.in[n:]
			if w.isEarlyAck(pkt) {
				w.done = true
				continue
			}
			w.out = append(w.out, pkt...)
			continue
		}
		if w.err != nil {
			w.m.Complete(time.Now(), fmt.Errorf("early publish %s: %w: %v", w.m.Topic, core.ErrConnectionLost, w.err))
			w.done = true
			continue
		}
		buf := make([]byte, max(len(b), 4096))
		n, err := raw(buf)
		w.at = time.Now()
		w.in, w.err = append(w.in, buf[:n]...), err
	}
	n := copy(b, w.out)
	w.out = w.out[n:]
	return n, nil
}

// isEarlyAck reports whether pkt (one whole packet) is the PUBACK of the
// early PUBLISH, and if so completes its receipt: accepted, or failed with
// an MQTT 5 reason code of 0x80 or more.
func (w *ackWatch) isEarlyAck(pkt []byte) bool {
	if pkt[0] != 0x40 {
		return false
	}
	i := 1 // past the fixed header: type byte and 1 to 4 length bytes
	for i < len(pkt) && i <= 4 && pkt[i]&0x80 != 0 {
		i++
	}
	body := pkt[min(i+1, len(pkt)):]
	if len(body) < 2 || int(body[0])<<8|int(body[1]) != core.EarlyPacketID {
		return false
	}
	if w.v5 && len(body) >= 3 && body[2] >= 0x80 {
		w.m.Complete(w.at, fmt.Errorf("early publish %s: broker refused it with reason 0x%02x", w.m.Topic, body[2]))
		return true
	}
	w.m.Complete(w.at, nil)
	return true
}

func (c *timedConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.early == nil {
		return c.Conn.Write(b)
	}
	// The first write is the CONNECT packet (both paho libraries write it
	// in one piece); the early PUBLISH rides in the same write.
	buf := append(append(make([]byte, 0, len(b)+len(c.early)), b...), c.early...)
	c.early = nil
	now := time.Now()
	n, err := c.Conn.Write(buf)
	if n == len(buf) {
		c.earlySent.Store(now.UnixNano())
		if c.earlyMsg.QoS == 0 {
			c.earlyMsg.Complete(now, nil)
		}
	} else {
		c.earlyMsg.Complete(time.Now(), fmt.Errorf("early publish %s: write with CONNECT: %w", c.earlyMsg.Topic, err))
	}
	return min(n, len(b)), err
}

// encodeEarly encodes a QoS 0 or 1 PUBLISH for protocol version v (4 or
// 5); QoS 1 uses packet id core.EarlyPacketID.
func encodeEarly(m *core.EarlyMessage, v int) []byte {
	body := make([]byte, 0, 6+len(m.Topic)+len(m.Payload))
	body = append(body, byte(len(m.Topic)>>8), byte(len(m.Topic)))
	body = append(body, m.Topic...)
	if m.QoS > 0 {
		body = append(body, byte(core.EarlyPacketID>>8), byte(core.EarlyPacketID&0xff))
	}
	if v == core.ProtocolMQTT5 {
		body = append(body, 0) // no properties
	}
	body = append(body, m.Payload...)
	h := byte(0x30) | m.QoS<<1
	if m.Retain {
		h |= 1
	}
	out := []byte{h}
	for n := len(body); ; {
		b := byte(n % 128)
		n /= 128
		if n > 0 {
			b |= 0x80
		}
		out = append(out, b)
		if n == 0 {
			break
		}
	}
	return append(out, body...)
}

// connack returns the time the first bytes arrived from the broker.
func (c *timedConn) connack() time.Time {
	if ns := c.firstRead.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// randomID returns 12 random hex digits.
func randomID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff)
	}
	return hex.EncodeToString(b[:])
}

// dial opens the transport connection of ep (core.DialTransport: one TLS
// builder, one hint per error, in transport).
func dial(ctx context.Context, ep endpoint.Endpoint, o core.Options) (*timedConn, error) {
	c, cache, err := core.DialTransport(ctx, ep, o)
	if err != nil {
		return nil, err
	}
	tcn := &timedConn{Conn: c, cache: cache}
	if o.Early != nil {
		tcn.early = encodeEarly(o.Early, o.ProtocolVersion)
		tcn.earlyMsg = o.Early
		if o.Early.QoS > 0 {
			tcn.watch = &ackWatch{m: o.Early, v5: o.ProtocolVersion == core.ProtocolMQTT5}
		}
	}
	return tcn, nil
}

// finish closes the connection and writes the ticket cache. An early
// message still unacknowledged fails with core.ErrClosed.
func (c *timedConn) finish() {
	if c.earlyMsg != nil {
		c.earlyMsg.Complete(time.Now(), fmt.Errorf("early publish %s: %w", c.earlyMsg.Topic, core.ErrClosed))
	}
	_ = c.Close() // the embedded connection's
	_ = c.cache.Close()
}

// infoFrom fills the transport part of ConnectionInfo.
func infoFrom(ep endpoint.Endpoint, c *timedConn, proto, clientID string, sessionPresent bool) core.ConnectionInfo {
	ti := c.Info()
	info := core.ConnectionInfo{
		URL:            ep.String(),
		Transport:      string(ti.Scheme),
		Protocol:       proto,
		ClientID:       clientID,
		DialStart:      ti.DialStart,
		TransportReady: ti.TransportReady,
		Connack:        c.connack(),
		SessionPresent: sessionPresent,
		TLSResumed:     ti.TLSResumed,
		Used0RTT:       ti.Used0RTT,
		Rejected0RTT:   ti.Rejected0RTT,
	}
	if ns := c.earlySent.Load(); ns != 0 {
		info.EarlySent = time.Unix(0, ns)
	}
	if st, ok := c.QUICStats(); ok {
		info.QUIC = &st
	}
	return info
}

// lifecycle is the Done/Err part shared by both versions.
type lifecycle struct {
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	err      error
	closeReq atomic.Bool
}

func newLifecycle() lifecycle { return lifecycle{done: make(chan struct{})} }

// end records why the connection ended (first reason wins) and closes done.
func (l *lifecycle) end(err error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	})
}

func (l *lifecycle) Done() <-chan struct{} { return l.done }

// ended returns, once the connection has ended, why (ErrClosed after
// Close, the loss otherwise) prefixed with what; nil while it is open.
func (l *lifecycle) ended(what string) error {
	select {
	case <-l.done:
		if err := l.Err(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%s: %w", what, core.ErrClosed)
	default:
		return nil
	}
}

func (l *lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// checkQoS validates a QoS argument.
func checkQoS(q byte) error {
	if q > 2 {
		return fmt.Errorf("QoS %d: want 0, 1 or 2", q)
	}
	return nil
}

// maxRemaining is MQTT's largest packet body (a 4-byte variable length).
const maxRemaining = 268_435_455

// checkPublish refuses, before anything is sent, what the broker could only
// answer by closing the connection: an invalid topic name or a payload
// that no MQTT packet can carry.
func checkPublish(topic string, payload []byte, q byte) error {
	if err := checkQoS(q); err != nil {
		return err
	}
	if err := mqttname.CheckTopic(topic); err != nil {
		return err
	}
	// Body: topic (2 + len), packet id (QoS > 0), MQTT 5 properties
	// (at least their length byte), payload.
	room := maxRemaining - 2 - len(topic) - 2 - 1
	if len(payload) > room {
		return fmt.Errorf("payload of %d bytes: an MQTT packet carries at most %d with this topic (256 MiB in all)", len(payload), room)
	}
	return nil
}

// publishPacketSize is the size of an MQTT 5 PUBLISH without properties
// (the client sets none): fixed header, topic, packet id for QoS > 0, the
// properties' length byte and the payload.
func publishPacketSize(topic string, payload []byte, q byte) int {
	rem := 2 + len(topic) + 1 + len(payload)
	if q > 0 {
		rem += 2
	}
	lenBytes := 1
	for n := rem; n > 127; n >>= 7 {
		lenBytes++
	}
	return 1 + lenBytes + rem
}

// checkSubscribe refuses an invalid filter before SUBSCRIBE is sent.
func checkSubscribe(filter string, q byte) error {
	if err := checkQoS(q); err != nil {
		return err
	}
	return mqttname.CheckFilter(filter)
}

// Dial connects to the broker at ep (a row of protocol mqtt: mqtt, mqtts,
// ws, wss or quic) with MQTT 3.1.1 or 5 as o.ProtocolVersion says, and
// returns once the broker accepted the connection (CONNACK). It is the
// mqtt row of client's dialer table (a core.DialFunc).
func Dial(ctx context.Context, ep endpoint.Endpoint, o core.Options) (core.Client, error) {
	if ep.Protocol != endpoint.ProtocolMQTT {
		return nil, fmt.Errorf("client/mqtt: %s is a %s URL, not MQTT", ep, ep.Protocol)
	}
	if err := o.Validate(); err != nil {
		err = fmt.Errorf("client options: %w", err)
		if o.Early != nil {
			o.Early.Complete(time.Now(), err)
		}
		return nil, err
	}
	o = o.WithDefaults(randomID)
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	var c core.Client
	var err error
	if o.ProtocolVersion == core.ProtocolMQTT5 {
		c, err = dialV5(ctx, ep, o)
	} else {
		c, err = dialV3(ctx, ep, o)
	}
	if err != nil && o.Early != nil {
		o.Early.Complete(time.Now(), fmt.Errorf("early publish %s: %w", o.Early.Topic, err))
	}
	return c, err
}
