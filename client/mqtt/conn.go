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
	n, err := c.Conn.Read(b)
	if n > 0 && c.firstRead.Load() == 0 {
		c.firstRead.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
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
	}
	return min(n, len(b)), err
}

// encodeEarly encodes a QoS 0 PUBLISH for protocol version v (4 or 5).
func encodeEarly(m *core.EarlyMessage, v int) []byte {
	body := make([]byte, 0, 3+len(m.Topic)+len(m.Payload))
	body = append(body, byte(len(m.Topic)>>8), byte(len(m.Topic)))
	body = append(body, m.Topic...)
	if v == core.ProtocolMQTT5 {
		body = append(body, 0) // no properties
	}
	body = append(body, m.Payload...)
	h := byte(0x30)
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
	}
	return tcn, nil
}

// finish closes the connection and writes the ticket cache.
func (c *timedConn) finish() {
	_ = c.Conn.Close()
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

// subscriptions is the client's filter table, shared by both versions.
type subscriptions struct {
	mu   sync.Mutex
	subs []sub
}

type sub struct {
	filter string
	h      core.Handler
}

func (s *subscriptions) add(filter string, h core.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.subs {
		if s.subs[i].filter == filter {
			s.subs[i].h = h
			return
		}
	}
	s.subs = append(s.subs, sub{filter, h})
}

// dispatch passes m to every matching handler. Called from one goroutine.
func (s *subscriptions) dispatch(m core.Message) {
	s.mu.Lock()
	var hs []core.Handler
	for _, x := range s.subs {
		if core.MatchTopic(x.filter, m.Topic) {
			hs = append(hs, x.h)
		}
	}
	s.mu.Unlock()
	for _, h := range hs {
		h(m)
	}
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

// Dial connects to the broker at ep (a row of protocol mqtt: mqtt, mqtts,
// ws, wss or quic) with MQTT 3.1.1 or 5 as o.ProtocolVersion says, and
// returns once the broker accepted the connection (CONNACK). It is the
// mqtt row of client's dialer table (a core.DialFunc).
func Dial(ctx context.Context, ep endpoint.Endpoint, o core.Options) (core.Client, error) {
	if ep.Protocol != endpoint.ProtocolMQTT {
		return nil, fmt.Errorf("client/mqtt: %s is a %s URL, not MQTT", ep, ep.Protocol)
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	o = o.WithDefaults(randomID)
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	if o.ProtocolVersion == core.ProtocolMQTT5 {
		return dialV5(ctx, ep, o)
	}
	return dialV3(ctx, ep, o)
}
