package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Multi-stream MQTT over QUIC on the server side (docs/mqtt-quic.md).
//
// muxConn presents one MQTT session that spans several QUIC streams as a
// single net.Conn, so the MQTT engine keeps reading one connection:
//
//   - Read merges whole MQTT packets from the control stream (the first
//     bidirectional stream), from client data streams (unidirectional or
//     bidirectional, with or without a flow header) and from QUIC datagrams
//     (QoS 0 PUBLISH). Packets never interleave inside each other; each
//     stream's packets keep their order. Nothing from a data stream or a
//     datagram is read before the first control packet (CONNECT).
//   - Write splits what the engine writes into packets and routes each:
//     acknowledgements of a packet that came on a client bidirectional
//     stream go back on that stream; PUBLISH goes on the control stream
//     (DeliveryControl), on a server-opened stream per topic
//     (DeliveryPerTopic) or on a new server-opened stream per PUBLISH
//     (DeliveryPerPublish); everything else goes on the control stream.
//
// Goroutines: one per open client data stream, one per server-opened
// bidirectional stream (reading the client's acknowledgements), one
// reading the control stream, one each accepting unidirectional and
// bidirectional streams and one reading datagrams (if enabled on both
// sides). Close and CloseWithError end and wait for all of them. Since
// these goroutines receive everything Read returns, the reader can wait
// without a goroutine of its own (NotifyReadable, quicidle.go).
type muxConn struct {
	*quicConn // the control stream; Read, Write, Close and deadlines are overridden
	so        QUICStreamOptions
	bufs      *sync.Pool // full-size control stream buffers (ctlBuffer)
	cnt       *QUICStreamCounters
	log       *slog.Logger
	mqttNext  bool // ALPN MQTT-next: server flows start with a flow header

	ctx     context.Context // ends the goroutines
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	gmu     sync.Mutex // guards stopped and wg.Add
	stopped bool       // Close waits for the goroutines: start no more

	ctl chan muxItem // packets read from the control stream
	// Packets from data streams and datagrams: the channel is made for
	// the first data stream, server flow or datagram reader (dataChan),
	// so a single-stream client's session holds none; dataReady is
	// closed then.
	dataq     atomic.Pointer[chan muxItem]
	dataOnce  sync.Once
	dataReady chan struct{}
	connected chan struct{} // closed once the reader has taken the first control packet
	connOnce  sync.Once
	v5        atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Reader state: one reader at a time, like any net.Conn.
	cur       []byte
	ctlOnly   bool        // cur ends inside a control stream packet
	held      *muxItem    // the control stream's DISCONNECT or end, read after the data streams
	dataSeen  atomic.Bool // a data stream or datagram was accepted
	firstDone bool
	rerr      error // the control stream ended: sticky

	rdl readDeadline

	fmu        sync.Mutex          // guards the fields below
	open       int                 // client data streams open
	biSeen     bool                // a client bidirectional data stream was seen: route acknowledgements
	clientAcks map[uint16]*muxFlow // client packet id -> the bidirectional client flow it came on; made when first used
	serverIDs  map[uint16]*muxFlow // server packet id -> the server flow its PUBLISH went on; made when first used
	topics     map[string]*muxFlow // per-topic delivery flows; made when first used
	nextFlow   uint64              // server flow sequence
	idle       []*muxFlow          // client flows to finish once fmu is released
	wdl        time.Time           // write deadline, applied to flow writes

	wmu   sync.Mutex // serialises Write
	wpend []byte     // the start of a packet the engine has not finished writing

	nmu    sync.Mutex // guards notify
	notify func()     // called once when Read would not block (NotifyReadable)
}

// muxItem is one or more whole packets, or the end of the control stream.
type muxItem struct {
	b       []byte
	partial bool // ends inside a packet (control stream only)
	err     error
}

// muxFlow is a data stream the session writes to: a client bidirectional
// stream (acknowledgements) or a server-opened stream (deliveries).
type muxFlow struct {
	mu      sync.Mutex // serialises writes
	send    io.WriteCloser
	dl      func(time.Time) error // sets the write deadline
	str     *quic.Stream          // bidirectional streams
	pending int                   // acknowledgements still to be written here (client flows)
	readEnd bool                  // the client's side ended (client flows)
	done    func()                // client flows: called once when finished
	broken  bool
}

func (f *muxFlow) write(b []byte, dl time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return net.ErrClosed
	}
	if f.dl != nil {
		_ = f.dl(dl)
	}
	if _, err := f.send.Write(b); err != nil {
		f.broken = true
		return err
	}
	return nil
}

// Delivery strategies of the broker (QUICStreamOptions.Delivery).
const (
	DeliveryControl    = "control"     // every PUBLISH on the control stream (default)
	DeliveryPerTopic   = "per-topic"   // one server-opened stream per topic
	DeliveryPerPublish = "per-publish" // one new server-opened stream per PUBLISH
)

// QUICStreamOptions configure multi-stream MQTT over QUIC on a listener.
// The zero value is a single-stream listener: a connection that opens any
// stream after its first is closed with QUICCodeStreamLimit and a reason
// naming the limit.
type QUICStreamOptions struct {
	// MaxDataStreams is how many client data streams (unidirectional, and
	// bidirectional after the control stream) one connection may have
	// open at once. A stream past it is refused with StreamCodeFlowRefused
	// (STOP_SENDING, and RESET_STREAM on a bidirectional one) and counted.
	// 0: single-stream listener.
	MaxDataStreams int
	// Delivery: DeliveryControl (default), DeliveryPerTopic or
	// DeliveryPerPublish. PUBLISH packets that carry a Topic Alias always go
	// on the control stream, so an alias is never used on a stream before
	// the stream that defines it.
	Delivery string
	// Datagrams enables QUIC DATAGRAM frames (RFC 9221): a client that
	// negotiated them may send QoS 0 PUBLISH packets as datagrams, one
	// whole packet per datagram.
	Datagrams bool
	// DatagramDelivery makes the server send QoS 0 deliveries as datagrams
	// when the client negotiated them and the packet fits; a larger packet
	// goes on a stream. Off by default: a client must read datagrams for
	// this (the mqtt5 crate's client does not).
	DatagramDelivery bool
	// MaxPacketSize bounds the packet a data stream may send; a larger
	// one closes the connection (the control stream hands it to the MQTT
	// engine, which refuses it). Default 16 MiB.
	MaxPacketSize int
	// ALPNs, if not empty, limits multi-stream mode to connections that
	// negotiated one of them; the others are single-stream (iotq gateway:
	// MQTT routes only).
	ALPNs []string
	// Counters, if set, counts streams and datagrams (for metrics).
	Counters *QUICStreamCounters
}

// QUICStreamCounters count multi-stream events over a listener's life.
type QUICStreamCounters struct {
	DataStreams      atomic.Uint64 // client data streams accepted
	StreamsRefused   atomic.Uint64 // client streams refused (limit, wrong type, bad flow id, user-defined flow)
	ServerStreams    atomic.Uint64 // streams the server opened for deliveries
	DatagramsIn      atomic.Uint64 // datagrams handed to the MQTT session
	DatagramsDropped atomic.Uint64 // datagrams dropped: not a whole QoS 0 PUBLISH, or the session ended
	DatagramsOut     atomic.Uint64 // deliveries sent as datagrams
	DatagramsTooBig  atomic.Uint64 // deliveries too large for a datagram, sent on a stream instead
}

const defaultMaxPacket = 16 << 20

func (so QUICStreamOptions) enabledFor(alpn string) bool {
	if so.MaxDataStreams <= 0 {
		return false
	}
	if len(so.ALPNs) == 0 {
		return true
	}
	for _, a := range so.ALPNs {
		if a == alpn {
			return true
		}
	}
	return false
}

// newMuxConn serves c's connection in multi-stream mode; bufs is the
// listener's pool of control stream buffers (newCtlBufferPool).
func newMuxConn(c *quicConn, so QUICStreamOptions, bufs *sync.Pool, log *slog.Logger) *muxConn {
	if so.MaxPacketSize <= 0 {
		so.MaxPacketSize = defaultMaxPacket
	}
	cnt := so.Counters
	if cnt == nil {
		cnt = &QUICStreamCounters{}
	}
	ctx, cancel := context.WithCancel(c.conn.Context())
	m := &muxConn{
		quicConn: c, so: so, bufs: bufs, cnt: cnt, log: log,
		mqttNext: c.conn.ConnectionState().TLS.NegotiatedProtocol == ALPNMQTTNext,
		ctx:      ctx, cancel: cancel,
		ctl: make(chan muxItem, 4), dataReady: make(chan struct{}),
		connected: make(chan struct{}), closing: make(chan struct{}),
	}
	// A server's connection knows the client's transport parameters when
	// it is accepted: a client that did not negotiate datagrams sends
	// none, so no goroutine waits for them.
	datagrams := so.Datagrams && c.conn.ConnectionState().SupportsDatagrams.Remote
	if datagrams {
		m.dataSeen.Store(true) // datagrams may be in flight at any time
	}
	m.wg.Add(3)
	go m.readControl()
	go m.acceptUni()
	go m.acceptBidi()
	if datagrams {
		m.dataChan()
		m.wg.Add(1)
		go m.readDatagrams()
	}
	return m
}

// ---------------------------------------------------------------------------
// Reading

// readControl queues what the control stream brings for Read as it comes,
// marking items that end inside a packet, so Read takes nothing from
// another stream before that packet is complete. After Close started it
// keeps reading and discards, so the peer's FIN is seen.
func (m *muxConn) readControl() {
	defer m.wg.Done()
	cb := ctlBuffer{pool: m.bufs}
	defer cb.release()
	var b boundary
	var first []byte // the start of CONNECT, until its protocol level is known
	n := 0
	for {
		buf := cb.next(n)
		var err error
		n, err = m.quicConn.Read(buf)
		if n > 0 {
			if first != nil || !b.started {
				b.started = true
				first = append(first, buf[:n]...)
				if done := m.noteConnect(first); done || len(first) >= 512 {
					first = nil
				}
			}
			out := append([]byte(nil), buf[:n]...)
			whole := b.feed(out)
			if !m.deliver(m.ctl, muxItem{b: out, partial: !whole}) {
				m.discard()
				return
			}
		}
		if err != nil {
			// The end must reach the reader, also when the connection's
			// context ended too (deliver might take that case): the
			// reader reads until Close.
			select {
			case m.ctl <- muxItem{err: err}:
				m.fireNotify()
			case <-m.closing:
			}
			return
		}
	}
}

// boundary follows packet boundaries in a byte stream.
type boundary struct {
	started bool
	rem     int    // bytes left of the current packet's body
	hdr     []byte // the fixed header read so far
	raw     bool   // malformed length: boundaries are lost
}

// feed consumes b and reports whether b ended at a packet boundary.
func (t *boundary) feed(b []byte) bool {
	for len(b) > 0 && !t.raw {
		if t.rem > 0 {
			k := min(t.rem, len(b))
			t.rem -= k
			b = b[k:]
			continue
		}
		t.hdr = append(t.hdr, b[0])
		b = b[1:]
		switch l := mqttPacketLen(t.hdr); {
		case l < 0:
			t.raw = true
		case l > 0:
			t.rem = l - len(t.hdr)
			t.hdr = t.hdr[:0]
		}
	}
	return !t.raw && t.rem == 0 && len(t.hdr) == 0
}

// discard reads the control stream to its end after Close started.
func (m *muxConn) discard() {
	buf := make([]byte, 4096)
	for {
		if _, err := m.quicConn.Read(buf); err != nil {
			return
		}
	}
}

// deliver queues it for the reader; false once the conn is closing.
func (m *muxConn) deliver(ch chan muxItem, it muxItem) bool {
	select {
	case ch <- it:
		m.fireNotify()
		return true
	case <-m.closing:
		return false
	case <-m.ctx.Done():
		return false
	}
}

// splitPackets returns how many bytes at the start of b are whole packets,
// and bad if the next packet is malformed or larger than max.
func splitPackets(b []byte, max int) (whole int, bad bool) {
	for whole < len(b) {
		l := mqttPacketLen(b[whole:])
		if l < 0 || l > max {
			return whole, true
		}
		if l == 0 || whole+l > len(b) {
			return whole, false
		}
		whole += l
	}
	return whole, false
}

func (m *muxConn) Read(p []byte) (int, error) {
	for len(m.cur) == 0 {
		if m.rerr != nil {
			return 0, m.rerr
		}
		if m.held != nil {
			// The control stream ends the session: first take what the
			// data streams still bring (the client sent it before), until
			// they are quiet.
			quiet := endQuiet
			if !m.dataSeen.Load() && !m.probeStreams() {
				// No data stream ever (a single-stream client): no wait.
				quiet = 0
			}
			t := time.NewTimer(quiet)
			data, _ := m.dataNow() // made before any stream was taken
			select {
			case it := <-data:
				t.Stop()
				m.cur, m.ctlOnly = it.b, false
				continue
			case <-t.C:
			case <-m.closing:
				t.Stop()
			}
			it := *m.held
			m.held = nil
			if it.err != nil {
				m.rerr = it.err
				continue
			}
			m.cur, m.ctlOnly = it.b, it.partial
			continue
		}
		midPacket := m.ctlOnly
		it, fromCtl, err := m.next()
		if err != nil {
			return 0, err
		}
		if fromCtl && !midPacket && m.firstDone &&
			(it.err != nil || it.b[0]>>4 == 14) { // DISCONNECT or the stream's end
			m.held = &it
			continue
		}
		if it.err != nil {
			m.rerr = it.err
			continue
		}
		m.cur, m.ctlOnly = it.b, it.partial
	}
	n := copy(p, m.cur)
	m.cur = m.cur[n:]
	if !m.firstDone && len(m.cur) == 0 && !m.ctlOnly {
		m.firstDone = true
		m.connOnce.Do(func() { close(m.connected) })
	}
	return n, nil
}

// noteConnect records the protocol version of the CONNECT at the start of
// b (MQTT 5 PUBLISH packets have properties: Topic Alias routing). It
// reports whether b told (or never will).
func (m *muxConn) noteConnect(b []byte) bool {
	if len(b) > 0 && b[0]>>4 != 1 {
		return true
	}
	if len(b) < 2 || mqttPacketLen(b) == 0 {
		return false
	}
	h := mqttHeaderLen(b)
	if len(b) < h+2 {
		return false
	}
	nl := int(b[h])<<8 | int(b[h+1])
	if lv := h + 2 + nl; lv < len(b) {
		m.v5.Store(b[lv] == 5)
		return true
	}
	return false
}

// endQuiet is how long data streams must stay quiet before the session
// reads the DISCONNECT (or end) of the control stream, when the client has
// used data streams or datagrams: a client that publishes on a data stream
// and then disconnects on the control stream sent the PUBLISH first, but
// nothing orders two QUIC streams.
const endQuiet = 25 * time.Millisecond

// next waits for the next item: from the control stream only until the
// first packet has been read, then from every source. fromCtl says where
// it came from.
func (m *muxConn) next() (it muxItem, fromCtl bool, err error) {
	for {
		dl, changed := m.rdl.get()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return muxItem{}, false, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			timeout = t.C
			defer t.Stop()
		}
		var data chan muxItem
		var made <-chan struct{}
		if m.firstDone && !m.ctlOnly {
			data, made = m.dataNow()
		}
		select {
		case it := <-m.ctl:
			return it, true, nil
		case it := <-data:
			return it, false, nil
		case <-made: // the first data stream: wait on its channel too
		case <-timeout:
			return muxItem{}, false, os.ErrDeadlineExceeded
		case <-changed:
		case <-m.closing:
			return muxItem{}, false, net.ErrClosed
		}
	}
}

func (m *muxConn) SetReadDeadline(t time.Time) error {
	m.rdl.set(t)
	return nil
}

func (m *muxConn) SetWriteDeadline(t time.Time) error {
	m.fmu.Lock()
	m.wdl = t
	m.fmu.Unlock()
	return m.quicConn.SetWriteDeadline(t)
}

func (m *muxConn) SetDeadline(t time.Time) error {
	return errors.Join(m.SetReadDeadline(t), m.SetWriteDeadline(t))
}

// ---------------------------------------------------------------------------
// Client data streams

func (m *muxConn) acceptUni() {
	defer m.wg.Done()
	for {
		rs, err := m.conn.AcceptUniStream(m.ctx)
		if err != nil {
			return
		}
		m.takeUni(rs)
	}
}

func (m *muxConn) acceptBidi() {
	defer m.wg.Done()
	for {
		s, err := m.conn.AcceptStream(m.ctx)
		if err != nil {
			return
		}
		m.takeBidi(s)
	}
}

func (m *muxConn) takeUni(rs *quic.ReceiveStream) {
	if !m.admit() {
		rs.CancelRead(StreamCodeFlowRefused)
		rs.ReleaseStreamCredit()
		return
	}
	if !m.spawn(func() { m.readData(rs, nil, rs.ReleaseStreamCredit, rs.CancelRead) }) {
		rs.CancelRead(StreamCodeFlowRefused)
	}
}

func (m *muxConn) takeBidi(s *quic.Stream) {
	if !m.admit() {
		s.CancelRead(StreamCodeFlowRefused)
		s.CancelWrite(StreamCodeFlowRefused)
		s.ReleaseStreamCredit()
		return
	}
	if !m.spawn(func() { m.readData(s, s, s.ReleaseStreamCredit, s.CancelRead) }) {
		s.CancelRead(StreamCodeFlowRefused)
		s.CancelWrite(StreamCodeFlowRefused)
	}
}

// spawn runs f on a goroutine that Close waits for; false once Close has
// started waiting.
func (m *muxConn) spawn(f func()) bool {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	if m.stopped {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// stopGoroutines ends and waits for every goroutine of the conn.
func (m *muxConn) stopGoroutines() {
	m.cancel()
	m.gmu.Lock()
	m.stopped = true
	m.gmu.Unlock()
	m.wg.Wait()
}

// probeStreams takes the data streams the QUIC layer has and the accept
// loops have not taken yet. It reports whether there was one.
func (m *muxConn) probeStreams() bool {
	ctx, cancel := context.WithCancel(m.ctx)
	cancel()
	found := false
	if rs, err := m.conn.AcceptUniStream(ctx); err == nil {
		m.takeUni(rs)
		found = true
	}
	if s, err := m.conn.AcceptStream(ctx); err == nil {
		m.takeBidi(s)
		found = true
	}
	return found
}

// admit counts a new client data stream, or refuses it past the limit.
func (m *muxConn) admit() bool {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if m.open >= m.so.MaxDataStreams {
		m.cnt.StreamsRefused.Add(1)
		m.log.Warn("quic: client data stream refused: too many streams open",
			"remote", m.RemoteAddr().String(), "limit", m.so.MaxDataStreams,
			"code", fmt.Sprintf("0x%X", StreamCodeFlowRefused))
		return false
	}
	m.open++
	m.cnt.DataStreams.Add(1)
	m.dataChan() // before dataSeen: Read's end-of-session wait needs it
	m.dataSeen.Store(true)
	return true
}

// readData reads one client data stream: an optional flow header, then
// whole packets, which it queues for Read. bi is the stream if it is
// bidirectional (acknowledgements go back on it).
func (m *muxConn) readData(r io.Reader, bi *quic.Stream, release func(), cancelRead func(quic.StreamErrorCode)) {
	var f *muxFlow
	finished := false
	finish := func() { // the stream no longer counts against the limit
		if finished {
			return
		}
		finished = true
		release()
		m.fmu.Lock()
		m.open--
		m.fmu.Unlock()
	}
	if bi != nil {
		f = &muxFlow{send: bi, dl: bi.SetWriteDeadline, str: bi}
		f.done = func() {
			_ = bi.Close()
			finish()
		}
	}
	refuse := func(code quic.StreamErrorCode, why string) {
		m.cnt.StreamsRefused.Add(1)
		m.log.Debug("quic: client data stream refused", "remote", m.RemoteAddr().String(),
			"reason", why, "code", fmt.Sprintf("0x%X", uint64(code)))
		cancelRead(code)
		if bi != nil {
			bi.CancelWrite(code)
		}
		finish()
	}
	// Nothing from a data stream is read before CONNECT: the protocol
	// version and the session exist only then.
	select {
	case <-m.connected:
	case <-m.ctx.Done():
		finish()
		return
	case <-m.closing:
		finish()
		return
	}
	buf := make([]byte, 16<<10)
	var pend []byte
	header := true // the stream's first bytes may be a flow header
	packets := 0
	for {
		n, err := r.Read(buf)
		pend = append(pend, buf[:n]...)
		if header && len(pend) > 0 {
			if !isFlowType(pend[0]) {
				header = false
			} else if h, hl, herr := parseFlowHeader(pend); herr == nil {
				header = false
				switch {
				case h.typ == flowTypeUserDefined:
					refuse(StreamCodeFlowRefused, "user-defined flow")
					return
				case h.typ == flowTypeControl:
					refuse(StreamCodeStreamType, "control flow header on a data stream")
					return
				case h.typ == flowTypeServerData || h.id&1 == 1:
					refuse(StreamCodeBadFlowID, "flow id not client-initiated")
					return
				}
				pend = append(pend[:0], pend[hl:]...)
			} else if !errors.Is(herr, errShortFlowHeader) || len(pend) > 32 {
				refuse(StreamCodeStreamType, "malformed flow header")
				return
			}
		}
		if !header {
			whole, bad := splitPackets(pend, m.so.MaxPacketSize)
			if bad {
				m.log.Info("quic: malformed or oversized MQTT packet on a data stream; closing the connection",
					"remote", m.RemoteAddr().String(), "max_packet_size", m.so.MaxPacketSize)
				_ = m.conn.CloseWithError(quicCodeProtocol, "malformed or oversized MQTT packet on a data stream")
				return
			}
			if whole > 0 {
				out := append([]byte(nil), pend[:whole]...)
				pend = append(pend[:0], pend[whole:]...)
				if why := m.inspect(out, f); why != "" {
					refuse(StreamCodeStreamType, why)
					return
				}
				packets++
				if !m.deliver(m.dataChan(), muxItem{b: out}) {
					finish()
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(pend) > 0 {
				m.log.Debug("quic: client data stream ended inside a packet", "remote", m.RemoteAddr().String())
			}
			if f == nil {
				finish()
				return
			}
			if errors.Is(err, io.EOF) && packets == 0 {
				// A flow opened and ended without packets (the mqtt5
				// crate's flow discard): answer with our FIN.
				_ = bi.Close()
			}
			m.fmu.Lock()
			f.readEnd = true
			last := f.pending == 0
			m.fmu.Unlock()
			if last {
				f.done()
			}
			return
		}
	}
}

// quicCodeProtocol closes a connection that broke the MQTT framing on a
// data stream (the mapping's ERROR_PROTOCOL_L0).
const quicCodeProtocol quic.ApplicationErrorCode = 0xB4

// inspect checks the packets a client data stream sent and records where
// their acknowledgements go. It returns why the stream must be refused,
// or "".
func (m *muxConn) inspect(b []byte, f *muxFlow) string {
	m.fmu.Lock()
	defer func() {
		idle := m.idle
		m.idle = nil
		m.fmu.Unlock()
		for _, f := range idle {
			f.done()
		}
	}()
	for len(b) > 0 {
		l := mqttPacketLen(b)
		pk := b[:l]
		b = b[l:]
		switch pk[0] >> 4 {
		case 1, 15: // CONNECT, AUTH: control stream only
			return "CONNECT or AUTH on a data stream"
		case 3: // PUBLISH
			if f == nil {
				continue
			}
			if p, ok := parsePublish(pk, false); ok && p.qos > 0 {
				m.route(p.id, f)
			}
		case 8, 10: // SUBSCRIBE, UNSUBSCRIBE
			if f == nil {
				continue
			}
			if id, ok := mqttPacketID(pk); ok {
				m.route(id, f)
			}
		case 4, 7: // PUBACK, PUBCOMP of a delivery: the exchange is over
			if id, ok := mqttPacketID(pk); ok {
				delete(m.serverIDs, id)
			}
		}
	}
	return ""
}

// route sends the acknowledgements of client packet id to f. fmu held.
func (m *muxConn) route(id uint16, f *muxFlow) {
	m.biSeen = true
	if old := m.clientAcks[id]; old != nil && old != f && m.unrefLocked(old) {
		// The client reused the id on another flow: the old flow has
		// nothing left to write; inspect finishes it after unlocking.
		m.idle = append(m.idle, old)
	}
	if m.clientAcks[id] != f {
		f.pending++
	}
	if m.clientAcks == nil {
		m.clientAcks = map[uint16]*muxFlow{}
	}
	m.clientAcks[id] = f
}

// unrefLocked drops one pending acknowledgement of f and reports whether f
// is finished (its side ended and nothing is left to write). fmu held.
func (m *muxConn) unrefLocked(f *muxFlow) bool {
	f.pending--
	return f.pending == 0 && f.readEnd
}

// ---------------------------------------------------------------------------
// Datagrams

func (m *muxConn) readDatagrams() {
	defer m.wg.Done()
	select {
	case <-m.connected:
	case <-m.ctx.Done():
		return
	}
	for {
		b, err := m.conn.ReceiveDatagram(m.ctx)
		if err != nil {
			return
		}
		// One whole QoS 0 PUBLISH per datagram.
		if len(b) < 2 || b[0]>>4 != 3 || (b[0]>>1)&3 != 0 || mqttPacketLen(b) != len(b) || len(b) > m.so.MaxPacketSize {
			m.cnt.DatagramsDropped.Add(1)
			continue
		}
		m.dataSeen.Store(true)
		if !m.deliver(m.dataChan(), muxItem{b: b}) {
			m.cnt.DatagramsDropped.Add(1)
			return
		}
		m.cnt.DatagramsIn.Add(1)
	}
}

// ---------------------------------------------------------------------------
// Writing

func (m *muxConn) Write(p []byte) (int, error) {
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
	err := m.writePackets(buf[:whole])
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

// routing reports whether packets may leave on a stream other than the
// control stream.
func (m *muxConn) routing() bool {
	if m.so.Delivery == DeliveryPerTopic || m.so.Delivery == DeliveryPerPublish || m.so.DatagramDelivery {
		return true
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.biSeen
}

// writePackets routes whole packets; runs of control-stream packets go out
// in one write.
func (m *muxConn) writePackets(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !m.routing() {
		_, err := m.quicConn.Write(b)
		return err
	}
	start := 0 // start of the pending run for the control stream
	for i := 0; i < len(b); {
		l := mqttPacketLen(b[i:])
		if l <= 0 || i+l > len(b) {
			break
		}
		pk := b[i : i+l]
		if m.sendElsewhere(pk) {
			if start < i {
				if _, err := m.quicConn.Write(b[start:i]); err != nil {
					return err
				}
			}
			start = i + l
		}
		i += l
	}
	if start < len(b) {
		_, err := m.quicConn.Write(b[start:])
		return err
	}
	return nil
}

// sendElsewhere sends pk on its flow or as a datagram and returns true, or
// returns false if pk belongs on the control stream.
func (m *muxConn) sendElsewhere(pk []byte) bool {
	m.fmu.Lock()
	dl := m.wdl
	m.fmu.Unlock()
	switch pk[0] >> 4 {
	case 3: // PUBLISH
		return m.sendPublish(pk, dl)
	case 4, 5, 7, 9, 11: // PUBACK, PUBREC, PUBCOMP, SUBACK, UNSUBACK to the client's packets
		id, ok := mqttPacketID(pk)
		if !ok {
			return false
		}
		m.fmu.Lock()
		f := m.clientAcks[id]
		finished := false
		if f != nil && pk[0]>>4 != 5 {
			delete(m.clientAcks, id)
			finished = m.unrefLocked(f)
		}
		m.fmu.Unlock()
		if f == nil {
			return false
		}
		err := f.write(pk, dl)
		if finished {
			f.done()
		}
		return err == nil
	case 6: // PUBREL of a QoS 2 delivery: the flow of its PUBLISH
		id, ok := mqttPacketID(pk)
		if !ok {
			return false
		}
		m.fmu.Lock()
		f := m.serverIDs[id]
		m.fmu.Unlock()
		return f != nil && f.write(pk, dl) == nil
	}
	return false
}

func (m *muxConn) sendPublish(pk []byte, dl time.Time) bool {
	p, ok := parsePublish(pk, m.v5.Load())
	if !ok {
		return false
	}
	if p.qos == 0 && m.so.DatagramDelivery && m.conn.ConnectionState().SupportsDatagrams.Remote {
		err := m.conn.SendDatagram(pk)
		if err == nil {
			m.cnt.DatagramsOut.Add(1)
			return true
		}
		if tooLarge := (*quic.DatagramTooLargeError)(nil); errors.As(err, &tooLarge) {
			m.cnt.DatagramsTooBig.Add(1)
		}
	}
	if p.alias {
		return false
	}
	var f *muxFlow
	switch m.so.Delivery {
	case DeliveryPerTopic:
		m.fmu.Lock()
		f = m.topics[p.topic]
		m.fmu.Unlock()
		if f == nil {
			if f = m.openServerFlow(true); f == nil {
				return false
			}
			m.fmu.Lock()
			if m.topics == nil {
				m.topics = map[string]*muxFlow{}
			}
			m.topics[p.topic] = f
			m.fmu.Unlock()
		}
	case DeliveryPerPublish:
		if f = m.openServerFlow(p.qos > 0); f == nil {
			return false
		}
	default:
		return false
	}
	if p.qos > 0 {
		m.fmu.Lock()
		if m.serverIDs == nil {
			m.serverIDs = map[uint16]*muxFlow{}
		}
		m.serverIDs[p.id] = f
		m.fmu.Unlock()
	}
	err := f.write(pk, dl)
	if m.so.Delivery == DeliveryPerPublish {
		_ = f.send.Close()
	}
	if err != nil {
		m.fmu.Lock()
		if m.topics[p.topic] == f {
			delete(m.topics, p.topic)
		}
		if p.qos > 0 && m.serverIDs[p.id] == f {
			delete(m.serverIDs, p.id)
		}
		m.fmu.Unlock()
		return false
	}
	return true
}

// openServerFlow opens a server flow without waiting: nil if the client's
// stream limit is reached (the packet then goes on the control stream). A
// bidirectional flow gets a reader for the client's acknowledgements.
func (m *muxConn) openServerFlow(bidi bool) *muxFlow {
	m.fmu.Lock()
	m.nextFlow++
	id := m.nextFlow<<1 | 1
	m.fmu.Unlock()
	var f *muxFlow
	if bidi {
		s, err := m.conn.OpenStream()
		if err != nil {
			return nil
		}
		f = &muxFlow{send: s, dl: s.SetWriteDeadline, str: s}
		m.dataChan()
		if !m.spawn(func() { m.readAcks(s) }) {
			s.CancelWrite(StreamCodeFlowRefused)
			return nil
		}
	} else {
		s, err := m.conn.OpenUniStream()
		if err != nil {
			return nil
		}
		f = &muxFlow{send: s, dl: s.SetWriteDeadline}
	}
	m.cnt.ServerStreams.Add(1)
	if m.mqttNext {
		if err := f.write(appendFlowHeader(nil, flowTypeServerData, id, 0, 0), time.Time{}); err != nil {
			return nil
		}
	}
	return f
}

// readAcks queues what the client sends on a server flow (acknowledgements
// of deliveries) for Read, until the client ends its side or the conn ends.
func (m *muxConn) readAcks(s *quic.Stream) {
	buf := make([]byte, 4096)
	var pend []byte
	for {
		n, err := s.Read(buf)
		pend = append(pend, buf[:n]...)
		whole, bad := splitPackets(pend, m.so.MaxPacketSize)
		if bad {
			s.CancelRead(StreamCodeStreamType)
			return
		}
		if whole > 0 {
			out := append([]byte(nil), pend[:whole]...)
			pend = append(pend[:0], pend[whole:]...)
			if why := m.inspect(out, nil); why != "" {
				s.CancelRead(StreamCodeStreamType)
				return
			}
			if !m.deliver(m.dataChan(), muxItem{b: out}) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// ---------------------------------------------------------------------------
// Closing

func (m *muxConn) Close() error {
	m.closeOnce.Do(func() {
		close(m.closing)
		m.fireNotify()
		m.closeErr = m.quicConn.Close()
		m.stopGoroutines()
	})
	return m.closeErr
}

func (m *muxConn) CloseWithError(code uint64, reason string) error {
	err := m.quicConn.CloseWithError(code, reason)
	m.closeOnce.Do(func() {
		close(m.closing)
		m.fireNotify()
		m.stopGoroutines()
		m.closeErr = err
	})
	return err
}

// ---------------------------------------------------------------------------
// Single-stream listeners

// refuseExtraStreams closes the connection of a single-stream conn with
// QUICCodeStreamLimit and a reason naming the limit as soon as the client
// opens a second stream, instead of leaving the client blocked on a
// stream the listener never reads. It ends with the connection.
func (c *quicConn) refuseExtraStreams(log *slog.Logger) {
	ctx := c.conn.Context()
	var once sync.Once
	refuse := func(kind string) {
		once.Do(func() {
			log.Info("quic: client opened a second stream on a single-stream listener; closing the connection",
				"remote", c.conn.RemoteAddr().String(), "stream", kind)
			_ = c.conn.CloseWithError(QUICCodeStreamLimit, singleStreamReason)
		})
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if _, err := c.conn.AcceptStream(ctx); err == nil {
			refuse("bidirectional")
		}
	}()
	go func() {
		defer c.wg.Done()
		if _, err := c.conn.AcceptUniStream(ctx); err == nil {
			refuse("unidirectional")
		}
	}()
}

// singleStreamReason is the reason phrase of QUICCodeStreamLimit.
const singleStreamReason = "stream limit: this listener serves 1 bidirectional stream per QUIC connection; " +
	"multi-stream MQTT over QUIC (data streams, per-topic or per-publish) is not supported here"
