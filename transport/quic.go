package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// Application error codes used when we close a QUIC connection.
const (
	quicCodeNoError  quic.ApplicationErrorCode = 0
	quicCodeNoStream quic.ApplicationErrorCode = 1 // no stream opened in time
	quicCodeShutdown quic.ApplicationErrorCode = 2 // listener closed before hand-off
)

func quicConfig(q QUICOptions, server bool) *quic.Config {
	q = q.withDefaults()
	c := &quic.Config{
		HandshakeIdleTimeout: q.HandshakeIdleTimeout,
		MaxIdleTimeout:       q.MaxIdleTimeout,
		KeepAlivePeriod:      q.KeepAlivePeriod,
		// A client opens no unidirectional stream of its own accord (the
		// broker may open some in multi-stream mode); listeners set their
		// own limits below.
		MaxIncomingUniStreams: -1,
		// With QLOGDIR set in the environment, every connection writes a
		// qlog file there (for qvis and the lab's captures); otherwise none.
		Tracer: qlog.DefaultConnectionTracer,
	}
	if server {
		c.Allow0RTT = !q.Refuse0RTT
		if n := int64(q.Streams.MaxDataStreams); n > 0 {
			// Multi-stream (docs/mqtt-quic.md): the control stream plus
			// n data streams, and one more of each kind, so a client that
			// goes past n gets a refused stream (a clear error) instead of
			// waiting for stream credit. Credit comes back when the broker
			// has finished with a stream (ReleaseStreamCredit), so the
			// QUIC count and the broker's count agree.
			c.MaxIncomingStreams = n + 2
			c.MaxIncomingUniStreams = n + 1
			c.RequireStreamCreditRelease = true
			c.EnableDatagrams = q.Streams.Datagrams
		} else {
			// Single stream: a second stream may open, and closes the
			// connection with QUICCodeStreamLimit and a reason
			// (refuseExtraStreams), so a multi-stream client learns why.
			c.MaxIncomingStreams = 2
			c.MaxIncomingUniStreams = 1
		}
	} else {
		c.MaxIncomingStreams = -1
		if q.ClientStreams.enabled() {
			// A multi-stream broker may deliver on streams it opens
			// (per-topic or per-publish server flows) and as datagrams.
			c.MaxIncomingStreams = 100
			c.MaxIncomingUniStreams = 100
			c.EnableDatagrams = q.ClientStreams.Datagrams
		}
	}
	return c
}

// ---------------------------------------------------------------------------
// Listener

// quicListener accepts QUIC connections and hands out the first
// client-opened bidirectional stream of each as a net.Conn.
//
// Goroutines: one accept loop, plus one per connection until its first
// stream arrives (bounded by the handshake idle timeout). Close stops and
// waits for all of them. The UDP socket stays open after Close while
// accepted conns live (they share it) and is closed with the last one.
type quicListener struct {
	ep   Endpoint
	opts QUICOptions
	log  *slog.Logger
	udp  *net.UDPConn
	tr   *quic.Transport
	ln   *quic.EarlyListener
	q    *acceptQueue
	bufs *sync.Pool // control stream buffers of multi-stream conns (ctlBuffer)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards active, closed
	active int        // accepted conns not yet closed
	closed bool

	once sync.Once
	err  error
}

func listenQUIC(ep Endpoint, opts ListenOptions, log *slog.Logger) (Listener, error) {
	addr, err := net.ResolveUDPAddr("udp", ep.Address())
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, err
	}
	tlsConf := opts.TLSConfig.Clone()
	tlsConf.NextProtos = opts.QUIC.withDefaults().NextProtos
	if tlsConf.MinVersion < tls.VersionTLS13 {
		tlsConf.MinVersion = tls.VersionTLS13
	}
	tr := &quic.Transport{Conn: udp, VerifySourceAddress: opts.QUIC.VerifySourceAddress}
	ln, err := tr.ListenEarly(tlsConf, quicConfig(opts.QUIC, true))
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &quicListener{
		ep: boundEndpoint(ep, udp.LocalAddr()), opts: opts.QUIC.withDefaults(), log: log,
		udp: udp, tr: tr, ln: ln, q: newAcceptQueue(), bufs: newCtlBufferPool(), ctx: ctx, cancel: cancel,
	}
	l.wg.Add(1)
	go l.loop()
	return l, nil
}

func (l *quicListener) loop() {
	defer l.wg.Done()
	for {
		conn, err := l.ln.Accept(l.ctx)
		if err != nil {
			// Only a closed listener or a cancelled ctx end Accept.
			return
		}
		if l.opts.AcceptConn != nil {
			l.opts.AcceptConn(conn)
		}
		l.wg.Add(1)
		go l.firstStream(conn)
	}
}

// firstStream waits for the connection's first bidirectional stream and
// queues it. A connection that fails here affects nobody else.
func (l *quicListener) firstStream(conn *quic.Conn) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.HandshakeIdleTimeout)
	defer cancel()
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		code, msg := quicCodeNoStream, "no stream opened"
		if l.ctx.Err() != nil {
			code, msg = quicCodeShutdown, "listener closed"
		}
		l.log.Debug("quic connection ended before opening a stream",
			"remote", conn.RemoteAddr().String(), "error", err)
		_ = conn.CloseWithError(code, msg)
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = conn.CloseWithError(quicCodeShutdown, "listener closed")
		return
	}
	l.active++
	l.mu.Unlock()
	qc := newQUICConn(conn, str, false, &l.opts, l.release)
	var c net.Conn = qc
	if l.opts.Streams.enabledFor(conn.ConnectionState().TLS.NegotiatedProtocol) {
		c = newMuxConn(qc, l.opts.Streams, l.bufs, l.log)
	} else {
		qc.refuseExtraStreams(l.log)
	}
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		st := conn.ConnectionState()
		l.log.Debug("quic stream accepted", "remote", conn.RemoteAddr().String(),
			"used_0rtt", st.Used0RTT, "resumed", st.TLS.DidResume)
	}
	l.q.put(c) // closes c (and so releases) if the listener closed meanwhile
}

// release is called once by every accepted conn when it has closed.
func (l *quicListener) release() {
	l.mu.Lock()
	l.active--
	last := l.closed && l.active == 0
	l.mu.Unlock()
	if last {
		l.closeSocket()
	}
}

func (l *quicListener) closeSocket() {
	_ = l.tr.Close()
	_ = l.udp.Close()
}

// Accept returns the first stream of the next QUIC connection. With 0-RTT
// the handshake may still be running: the stream already carries the
// client's early data.
func (l *quicListener) Accept(ctx context.Context) (net.Conn, error) { return l.q.get(ctx) }
func (l *quicListener) Addr() net.Addr                               { return l.udp.LocalAddr() }
func (l *quicListener) Endpoint() Endpoint                           { return l.ep }

// Close stops accepting: handshakes in flight are refused, connections not
// yet handed out are closed. Conns already accepted keep working; the UDP
// socket closes with the last of them.
func (l *quicListener) Close() error {
	l.once.Do(func() {
		l.q.close()
		l.cancel()
		l.err = l.ln.Close()
		l.wg.Wait()
		l.mu.Lock()
		l.closed = true
		last := l.active == 0
		l.mu.Unlock()
		if last {
			l.closeSocket()
		}
	})
	return l.err
}

// ---------------------------------------------------------------------------
// Client

func dialQUIC(ctx context.Context, ep Endpoint, opts DialOptions, start time.Time) (Conn, error) {
	q := opts.QUIC.withDefaults()
	raddr, err := resolveUDP(ctx, ep.Address())
	if err != nil {
		return nil, err
	}
	network := "udp6"
	if raddr.IP.To4() != nil {
		network = "udp4" // works where IPv6 is disabled, e.g. in a lab namespace
	}
	tlsConf, err := ClientTLSConfig(ep, opts)
	if err != nil {
		return nil, err
	}
	if q.ClientStreams.enabled() {
		// Flow headers need MQTT-next; brokers without it answer mqtt.
		tlsConf.NextProtos = append([]string{ALPNMQTTNext}, tlsConf.NextProtos...)
	}
	udp, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: udp}
	release := func() {
		_ = tr.Close()
		_ = udp.Close()
	}
	qc := quicConfig(q, false)
	var conn *quic.Conn
	if q.Disable0RTT {
		conn, err = tr.Dial(ctx, raddr, tlsConf, qc)
	} else {
		conn, err = tr.DialEarly(ctx, raddr, tlsConf, qc)
	}
	if err != nil {
		release()
		return nil, err
	}
	ready := time.Now()
	// If DialEarly returned before the handshake completed, we may send
	// 0-RTT data now.
	attempted := false
	select {
	case <-conn.HandshakeComplete():
	default:
		attempted = true
	}
	// Known upstream issue (quic-go #4303, open): opening a stream while
	// the run loop stores the server's transport parameters is a data
	// race on the parameters pointer; the race detector may report it in
	// 0-RTT tests. Either value is valid for the new stream.
	str, err := conn.OpenStreamSync(ctx)
	rejected := errors.Is(err, quic.Err0RTTRejected)
	if rejected {
		// Rejected before we wrote anything: nothing to resend. The
		// handshake may have completed before the check above, so this
		// is the only sign that the client offered 0-RTT.
		attempted = false
		if conn, err = conn.NextConnection(ctx); err == nil {
			str, err = conn.OpenStreamSync(ctx)
		}
	}
	if err != nil {
		_ = conn.CloseWithError(quicCodeNoError, "")
		release()
		return nil, fmt.Errorf("open stream: %w", err)
	}
	c := newQUICConn(conn, str, true, &q, release)
	c.info = Info{Scheme: ep.Scheme, DialStart: start, TransportReady: ready, Rejected0RTT: rejected}
	c.earlyPending = attempted
	c.hsWatch = make(chan struct{})
	c.wg.Add(1)
	go c.watchHandshake()
	return c, nil
}

func resolveUDP(ctx context.Context, hostport string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("no address for %s", host)
	}
	ip := ips[0]
	for _, a := range ips { // prefer IPv4, as the TCP dialer's first choice would
		if a.Is4() || a.Is4In6() {
			ip = a
			break
		}
	}
	return net.ResolveUDPAddr("udp", net.JoinHostPort(ip.Unmap().String(), port))
}

// ---------------------------------------------------------------------------
// Stream as net.Conn

// quicConn is one QUIC stream used as a net.Conn, on either side.
//
// Write calls are serialised by wmu, so concurrent writers are safe. On the
// client, data written before the handshake completes is kept until 0-RTT is
// known to be accepted; if it was rejected, the conn moves to the 1-RTT
// connection (NextConnection), opens a new stream and re-sends it, so the
// layer above never notices.
//
// Close ends the stream's send side, waits (bounded) until the peer has
// read everything, then closes the QUIC connection: the side that sent its
// FIN first closes the connection once the peer's FIN arrived; the other
// side waits for that close. No data written before Close is lost.
//
// Lock order: wmu before mu.
type quicConn struct {
	conn    *quic.Conn
	client  bool
	opts    *QUICOptions // shared: not modified
	release func()       // called once after the connection closed
	flush   func()       // client: session cache flush, may be nil

	wmu sync.Mutex // serialises Write, 0-RTT recovery and the FIN
	// early holds what was written while 0-RTT was undecided. wmu must be
	// held.
	early []byte

	mu           sync.Mutex // guards the fields below
	str          *quic.Stream
	earlyPending bool // 0-RTT attempted and not yet known to be accepted
	reading      int  // Read calls in progress
	closed       bool
	closing      chan struct{} // closed when Close starts
	wrClosed     bool          // CloseWrite sent our FIN
	peerFIN      bool          // the peer's stream end was read
	peerFINFirst bool          // ... before our Close or CloseWrite
	peerFINCh    chan struct{}
	rdl, wdl     time.Time // deadlines, re-applied after 0-RTT recovery
	info         Info

	hsWatch chan struct{} // client: closed when the handshake finished or failed
	// migrated closes the sockets Migrate added (quicmigrate.go); mu.
	migrated []func()
	migMu    sync.Mutex // serialises Migrate
	// Client: what quic-go's Conn reports about addresses and state must
	// not be read after a migration (quic-go v0.65.0 swaps its socket
	// without a lock), so a client keeps its own copies; mu.
	laddr, raddr net.Addr
	hsState      *quic.ConnectionState // at handshake completion

	wg sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// newQUICConn wraps str; opts are shared, not copied (a listener's
// options serve all its conns).
func newQUICConn(conn *quic.Conn, str *quic.Stream, client bool, opts *QUICOptions, release func()) *quicConn {
	return &quicConn{
		conn: conn, str: str, client: client, opts: opts, release: release,
		peerFINCh: make(chan struct{}), closing: make(chan struct{}),
		laddr: conn.LocalAddr(), raddr: conn.RemoteAddr(),
	}
}

// watchHandshake records when the client's handshake completed and what it
// negotiated. It ends with the handshake or the connection.
func (c *quicConn) watchHandshake() {
	defer c.wg.Done()
	defer close(c.hsWatch)
	select {
	case <-c.conn.HandshakeComplete():
	case <-c.conn.Context().Done():
		return
	}
	now := time.Now()
	st := c.conn.ConnectionState()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hsState = &st
	c.info.HandshakeDone = now
	if c.info.TransportReady.IsZero() || c.info.TransportReady.After(now) {
		c.info.TransportReady = now
	}
	c.info.Used0RTT = st.Used0RTT
	c.info.TLSResumed = st.TLS.DidResume
	c.info.NegotiatedProto = st.TLS.NegotiatedProtocol
	if c.earlyPending && !st.Used0RTT {
		c.info.Rejected0RTT = true
	}
}

func (c *quicConn) stream() *quic.Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.str
}

// settleEarly checks whether the 0-RTT outcome is known. It returns true
// if 0-RTT was rejected and the caller must recover. wmu must be held.
func (c *quicConn) settleEarly() (rejected bool) {
	c.mu.Lock()
	pending := c.earlyPending
	c.mu.Unlock()
	if !pending {
		return false
	}
	st, ok := c.stateAfterHandshake()
	if !ok {
		return false
	}
	if st.Used0RTT {
		c.mu.Lock()
		c.earlyPending = false
		c.mu.Unlock()
		c.early = nil
		return false
	}
	return true
}

// recover moves to the 1-RTT connection after a 0-RTT rejection: new
// stream, early data re-sent. It does nothing if old is no longer the
// current stream (someone else recovered). wmu must be held.
func (c *quicConn) recover(old *quic.Stream) error {
	c.mu.Lock()
	if c.str != old {
		c.mu.Unlock()
		return nil
	}
	closed, rdl, wdl := c.closed, c.rdl, c.wdl
	c.mu.Unlock()
	if closed {
		return net.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.HandshakeIdleTimeout)
	defer cancel()
	conn, err := c.conn.NextConnection(ctx)
	if err != nil {
		return fmt.Errorf("quic: 0-RTT rejected and handshake failed: %w", err)
	}
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return fmt.Errorf("quic: 0-RTT rejected, open new stream: %w", err)
	}
	_ = str.SetReadDeadline(rdl)
	_ = str.SetWriteDeadline(wdl)
	if len(c.early) > 0 {
		if _, err := str.Write(c.early); err != nil {
			return fmt.Errorf("quic: 0-RTT rejected, resend %d bytes: %w", len(c.early), err)
		}
	}
	c.early = nil
	c.mu.Lock()
	c.str = str
	c.earlyPending = false
	c.info.Rejected0RTT = true
	c.mu.Unlock()
	return nil
}

func (c *quicConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		str := c.str
		c.reading++
		c.mu.Unlock()

		n, err := str.Read(p)

		c.mu.Lock()
		c.reading--
		if errors.Is(err, io.EOF) {
			c.markPeerFINLocked()
		}
		c.mu.Unlock()
		if c.client && n == 0 && errors.Is(err, quic.Err0RTTRejected) {
			c.wmu.Lock()
			rerr := c.recover(str)
			c.wmu.Unlock()
			if rerr != nil {
				return 0, rerr
			}
			continue
		}
		return n, mapQUICError(err)
	}
}

// markPeerFINLocked records that the peer ended its stream. c.mu must be
// held.
func (c *quicConn) markPeerFINLocked() {
	if c.peerFIN {
		return
	}
	c.peerFIN = true
	c.peerFINFirst = !c.closed && !c.wrClosed
	close(c.peerFINCh)
}

func (c *quicConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	written := 0
	for {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return written, net.ErrClosed
		}
		if c.client && c.settleEarly() {
			if err := c.recover(c.stream()); err != nil {
				return written, err
			}
		}
		c.mu.Lock()
		str, pending := c.str, c.earlyPending
		c.mu.Unlock()
		chunk := p[written:]
		if pending {
			room := max0RTTBytes - len(c.early)
			if room <= 0 {
				// Early-data budget spent: the rest waits for the
				// handshake, then the loop settles 0-RTT.
				if err := c.waitHandshake(); err != nil {
					return written, err
				}
				continue
			}
			if len(chunk) > room {
				chunk = chunk[:room]
			}
		}
		n, err := str.Write(chunk)
		if pending {
			c.early = append(c.early, chunk[:n]...)
		}
		written += n
		if err == nil {
			if written == len(p) {
				return written, nil
			}
			continue
		}
		if c.client && errors.Is(err, quic.Err0RTTRejected) {
			if rerr := c.recover(str); rerr != nil {
				return written, rerr
			}
			continue
		}
		return written, mapQUICError(err)
	}
}

// max0RTTBytes bounds what a client sends as 0-RTT data; more waits for
// the handshake. It keeps early data to CONNECT and what rides right behind
// it (docs/0rtt.md), and it avoids a stall seen with quic-go v0.65.0: with
// much unacknowledgeable 0-RTT data in flight and the client's first Initial
// packet lost, the reduced congestion window blocked the Initial
// retransmission and the handshake never completed (the same case as
// ngtcp2 PR 815).
const max0RTTBytes = 8 << 10

// waitHandshake blocks until the handshake completes, the connection ends,
// Close starts or the write deadline passes. wmu must be held.
func (c *quicConn) waitHandshake() error {
	c.mu.Lock()
	wdl := c.wdl
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !wdl.IsZero() {
		t := time.NewTimer(time.Until(wdl))
		defer t.Stop()
		timeout = t.C
	}
	hs := c.conn.HandshakeComplete()
	if c.hsWatch != nil {
		hs = c.hsWatch // settleEarly reads what watchHandshake recorded
	}
	select {
	case <-hs:
		if _, ok := c.stateAfterHandshake(); c.hsWatch != nil && !ok {
			return mapQUICError(context.Cause(c.conn.Context())) // failed
		}
		return nil
	case <-c.conn.Context().Done():
		return mapQUICError(context.Cause(c.conn.Context()))
	case <-c.closing:
		return net.ErrClosed
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

// mapQUICError turns a clean close by the peer into io.EOF.
func mapQUICError(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote && ae.ErrorCode == quicCodeNoError {
		return io.EOF
	}
	return err
}

// Close ends the stream and the connection without losing written data;
// it blocks at most the close timeout (QUICOptions.CloseTimeout).
// Idempotent.
func (c *quicConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *quicConn) close() error {
	c.mu.Lock()
	c.closed = true
	str := c.str
	c.mu.Unlock()
	close(c.closing)
	// Stop a blocked writer, then take the write lock so the FIN never
	// races a Write.
	if !c.wmu.TryLock() {
		_ = str.SetWriteDeadline(time.Now())
		c.wmu.Lock()
	}
	c.mu.Lock()
	str = c.str // may have changed by a 0-RTT recovery
	c.mu.Unlock()
	_ = str.Close()
	c.wmu.Unlock()

	wait := c.closeTimeout()
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	c.mu.Lock()
	peerFirst, reading := c.peerFINFirst, c.reading
	c.mu.Unlock()
	switch {
	case peerFirst:
		// The peer closed first and closes the connection once it has our
		// FIN.
		select {
		case <-c.conn.Context().Done():
		case <-timer.C:
		}
	case reading == 0:
		// Nobody reads: drain until the peer's FIN.
		_ = str.SetReadDeadline(deadline)
		_, _ = io.Copy(io.Discard, str)
	default:
		// A Read in progress will see the peer's FIN.
		select {
		case <-c.peerFINCh:
		case <-c.conn.Context().Done():
		case <-timer.C:
		}
	}
	err := c.conn.CloseWithError(quicCodeNoError, "")
	c.wg.Wait()
	if c.release != nil {
		c.release()
	}
	c.closeMigrated()
	if c.flush != nil {
		c.flush()
	}
	return err
}

// CloseWrite ends the send side of the stream (FIN); reading goes on until
// the peer's FIN. Close must still be called. A conn that sent its FIN
// first closes the QUIC connection in Close once the peer's FIN arrived.
func (c *quicConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.closed || c.wrClosed {
		c.mu.Unlock()
		return nil
	}
	if !c.peerFIN {
		c.wrClosed = true
	}
	str, pending := c.str, c.earlyPending
	c.mu.Unlock()
	if c.client && pending {
		// The FIN must not be sent before 0-RTT is settled: a rejection
		// would re-send the early data on a new stream.
		if err := c.waitHandshake(); err != nil {
			return err
		}
		if c.settleEarly() {
			if err := c.recover(str); err != nil {
				return err
			}
			str = c.stream()
		}
	}
	return str.Close()
}

// CloseWithError closes the QUIC connection at once with an application
// error code and reason, which the peer sees as a *quic.ApplicationError;
// data not yet delivered is lost. Close may still be called and does
// nothing more. Use it to tell a peer why it was refused (iotq gateway:
// upstream unavailable).
func (c *quicConn) CloseWithError(code uint64, reason string) error {
	err := c.conn.CloseWithError(quic.ApplicationErrorCode(code), reason)
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.closing)
		c.wg.Wait()
		if c.release != nil {
			c.release()
		}
		c.closeMigrated()
		if c.flush != nil {
			c.flush()
		}
		c.closeErr = err
	})
	return err
}

// HandshakeComplete is closed when the QUIC handshake has completed (or
// never, if the connection failed first: see Context).
func (c *quicConn) HandshakeComplete() <-chan struct{} { return c.conn.HandshakeComplete() }

// Context ends when the QUIC connection has ended.
func (c *quicConn) Context() context.Context { return c.conn.Context() }

func (c *quicConn) closeTimeout() time.Duration {
	if c.opts.CloseTimeout > 0 {
		return c.opts.CloseTimeout
	}
	return min(time.Second+4*c.conn.ConnectionStats().SmoothedRTT, maxCloseTimeout)
}

func (c *quicConn) LocalAddr() net.Addr {
	if !c.client {
		return c.conn.LocalAddr()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.laddr
}

// RemoteAddr is the peer's current address (a server's conn follows its
// client's NAT rebinding and migration).
func (c *quicConn) RemoteAddr() net.Addr {
	if !c.client {
		return c.conn.RemoteAddr()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raddr
}

// stateAfterHandshake returns the connection state as it was when the
// client's handshake completed; false before (or if it never did).
func (c *quicConn) stateAfterHandshake() (quic.ConnectionState, bool) {
	select {
	case <-c.hsWatch:
	default:
		return quic.ConnectionState{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hsState == nil {
		return quic.ConnectionState{}, false
	}
	return *c.hsState, true
}

func (c *quicConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *quicConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	str := c.str
	c.mu.Unlock()
	return str.SetReadDeadline(t)
}

func (c *quicConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	str := c.str
	c.mu.Unlock()
	return str.SetWriteDeadline(t)
}

// Info returns the connection facts; see Conn.Info for when they are final.
func (c *quicConn) Info() Info {
	if !c.client {
		st := c.conn.ConnectionState()
		return Info{Scheme: SchemeQUIC, Used0RTT: st.Used0RTT, TLSResumed: st.TLS.DidResume, NegotiatedProto: st.TLS.NegotiatedProtocol}
	}
	if c.hsWatch != nil {
		t := time.NewTimer(c.opts.HandshakeIdleTimeout)
		select {
		case <-c.hsWatch:
		case <-t.C:
		}
		t.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

func (c *quicConn) QUICStats() (QUICStats, bool) { return quicStats(c.conn), true }

func quicStats(conn *quic.Conn) QUICStats {
	s := conn.ConnectionStats()
	return QUICStats{
		SmoothedRTT:   s.SmoothedRTT,
		MinRTT:        s.MinRTT,
		LatestRTT:     s.LatestRTT,
		BytesSent:     s.BytesSent,
		BytesReceived: s.BytesReceived,
		PacketsSent:   s.PacketsSent,
		PacketsLost:   s.PacketsLost,
	}
}

// StatsOf returns the QUIC statistics of a conn returned by Dial or by a
// QUIC Listener's Accept; ok is false for other conns. Conns accepted by a
// QUIC listener also implement Conn: their Info reports Used0RTT,
// TLSResumed and NegotiatedProto (final once the handshake completed).
func StatsOf(c net.Conn) (QUICStats, bool) {
	switch q := c.(type) {
	case *quicConn:
		return quicStats(q.conn), true
	case interface{ QUICStats() (QUICStats, bool) }: // Conn and wrappers
		return q.QUICStats()
	}
	return QUICStats{}, false
}
