package coapdtls

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/dtls/v3"
)

// Config configures a DTLS listener.
type Config struct {
	// PSK maps identities to keys. Empty: no PSK cipher suites.
	PSK map[string][]byte
	// TLSConfig supplies certificates (Certificates); nil or none: PSK only.
	TLSConfig *tls.Config
	// HandshakeTimeout bounds a handshake. Default 20s.
	HandshakeTimeout time.Duration
	// Sessions bounds the sessions kept for resumption (the oldest go
	// first). Default DefaultSessions; negative: no resumption (no
	// session IDs are issued).
	Sessions int
	// SessionLifetime is how long a session can be resumed after its full
	// handshake. Default DefaultSessionLifetime.
	SessionLifetime time.Duration
	// Logger receives debug logs. nil: discard.
	Logger *slog.Logger
}

// Addr is a peer address with the PSK identity it authenticated with.
type Addr struct {
	*net.UDPAddr
	identity string
}

// Stats are a listener's handshake counters.
type Stats struct {
	Handshakes        int64 // completed handshakes, full and resumed
	Resumed           int64 // of which resumed a session (abbreviated handshake)
	HandshakeFailures int64 // handshakes that failed or timed out
	Sessions          int64 // sessions currently stored for resumption
}

// Identity is the peer's PSK identity ("" for certificate sessions).
func (a Addr) Identity() string { return a.identity }

var pskSuites = []dtls.CipherSuiteID{
	dtls.TLS_PSK_WITH_AES_128_CCM_8, // mandatory for CoAP (RFC 7252 9.1.3.1)
	dtls.TLS_PSK_WITH_AES_128_CCM,
	dtls.TLS_PSK_WITH_AES_128_GCM_SHA256,
	dtls.TLS_PSK_WITH_AES_128_CBC_SHA256,
}

var certSuites = []dtls.CipherSuiteID{
	dtls.TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, // mandatory for CoAP (RFC 7252 9.1.3.3)
	dtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	dtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
}

type packet struct {
	data []byte
	from Addr
}

// Listener is a DTLS server that looks like a net.PacketConn.
type Listener struct {
	l    net.Listener
	log  *slog.Logger
	in   chan packet
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	conn map[string]*dtls.Conn
	wg   sync.WaitGroup
	hs   time.Duration
	sess *serverSessions // nil: no resumption

	handshakes, resumed, failures atomic.Int64
}

// Listen starts a DTLS listener on addr (host:port).
func Listen(addr string, c Config) (*Listener, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("coaps listen %s: %w", addr, err)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Sessions == 0 {
		c.Sessions = DefaultSessions
	}
	if c.SessionLifetime <= 0 {
		c.SessionLifetime = DefaultSessionLifetime
	}
	// pion/dtls's options API; WithExtendedMasterSecret(Request) is its
	// default too, set here because the handshake relies on it.
	opts := []dtls.ServerOption{dtls.WithExtendedMasterSecret(dtls.RequestExtendedMasterSecret)}
	var suites []dtls.CipherSuiteID
	var sess *serverSessions
	if c.Sessions > 0 {
		sess = newServerSessions(c.Sessions, c.SessionLifetime)
		opts = append(opts, dtls.WithSessionStore(sess))
	}
	if len(c.PSK) > 0 {
		psk := c.PSK
		opts = append(opts, dtls.WithPSK(func(identity []byte) ([]byte, error) {
			if k, ok := psk[string(identity)]; ok {
				return k, nil
			}
			return nil, fmt.Errorf("unknown PSK identity %q", identity)
		}), dtls.WithPSKIdentityHint([]byte("iotq")))
		suites = append(suites, pskSuites...)
	}
	if c.TLSConfig != nil && len(c.TLSConfig.Certificates) > 0 {
		opts = append(opts, dtls.WithCertificates(c.TLSConfig.Certificates...))
		suites = append(suites, certSuites...)
	}
	if len(suites) == 0 {
		return nil, fmt.Errorf("coaps listen %s: no PSK identities and no certificate: give coap.psk_file (identity:key lines) or a TLS certificate", addr)
	}
	opts = append(opts, dtls.WithCipherSuites(suites...))
	l, err := dtls.ListenWithOptions("udp", ua, opts...)
	if err != nil {
		return nil, fmt.Errorf("coaps listen %s: %w", addr, err)
	}
	dl := &Listener{l: l, log: c.Logger, in: make(chan packet, 256), done: make(chan struct{}), conn: map[string]*dtls.Conn{}, hs: c.HandshakeTimeout, sess: sess}
	dl.wg.Add(1)
	go func() {
		defer dl.wg.Done()
		dl.acceptLoop()
	}()
	return dl, nil
}

func (d *Listener) acceptLoop() {
	for {
		c, err := d.l.Accept()
		if err != nil {
			select {
			case <-d.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Debug("dtls accept failed", "error", err)
			continue
		}
		dc, ok := c.(*dtls.Conn)
		if !ok {
			_ = c.Close()
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serve(dc)
		}()
	}
}

func (d *Listener) serve(c *dtls.Conn) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d.hs)
	go func() {
		select {
		case <-d.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.HandshakeContext(ctx)
	cancel()
	if err != nil {
		d.failures.Add(1)
		d.log.Debug("dtls handshake failed", "remote", c.RemoteAddr(), "error", err)
		return
	}
	st, _ := c.ConnectionState()
	identity := string(st.IdentityHint)
	if d.sess != nil {
		// A resumed handshake carries no PSK identity: the session's
		// full handshake does.
		var resumed bool
		resumed, identity = d.sess.completed(st.SessionID, identity)
		if resumed {
			d.resumed.Add(1)
		}
	}
	d.handshakes.Add(1)
	ua, _ := c.RemoteAddr().(*net.UDPAddr)
	from := Addr{UDPAddr: ua, identity: identity}
	key := from.String()
	d.mu.Lock()
	if old := d.conn[key]; old != nil {
		_ = old.Close()
	}
	d.conn[key] = c
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.conn[key] == c {
			delete(d.conn, key)
		}
		d.mu.Unlock()
	}()
	buf := make([]byte, 65535)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		p := packet{data: append([]byte(nil), buf[:n]...), from: from}
		select {
		case d.in <- p:
		case <-d.done:
			return
		}
	}
}

// ReadFrom returns the next datagram of any DTLS session.
func (d *Listener) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case p := <-d.in:
		return copy(b, p.data), p.from, nil
	case <-d.done:
		return 0, nil, net.ErrClosed
	}
}

// WriteTo sends b on the DTLS session of addr.
func (d *Listener) WriteTo(b []byte, addr net.Addr) (int, error) {
	d.mu.Lock()
	c := d.conn[addr.String()]
	d.mu.Unlock()
	if c == nil {
		return 0, fmt.Errorf("coaps: no DTLS session with %s", addr)
	}
	return c.Write(b)
}

// Close closes the listener and every session and waits for their
// goroutines. Idempotent.
func (d *Listener) Close() error {
	var err error
	d.once.Do(func() {
		close(d.done)
		err = d.l.Close()
		d.mu.Lock()
		for _, c := range d.conn {
			_ = c.Close()
		}
		d.mu.Unlock()
		d.wg.Wait()
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Stats returns the handshake counters.
func (d *Listener) Stats() Stats {
	st := Stats{Handshakes: d.handshakes.Load(), Resumed: d.resumed.Load(), HandshakeFailures: d.failures.Load()}
	if d.sess != nil {
		st.Sessions = int64(d.sess.Len())
	}
	return st
}

// LocalAddr is the bound UDP address.
func (d *Listener) LocalAddr() net.Addr { return d.l.Addr() }

// SetDeadline and friends are not supported (the message layer does not use them).
func (d *Listener) SetDeadline(time.Time) error      { return nil }
func (d *Listener) SetReadDeadline(time.Time) error  { return nil }
func (d *Listener) SetWriteDeadline(time.Time) error { return nil }

// ClientConfig configures Dial.
type ClientConfig struct {
	// Identity and Key: the PSK to use. Empty Identity: certificates.
	Identity string
	Key      []byte
	// TLSConfig: RootCAs, ServerName, InsecureSkipVerify for certificate
	// sessions.
	TLSConfig *tls.Config
	// Sessions, if set, keeps the session for resumption and offers a
	// stored one: the handshake is then abbreviated (ClientConn.Resumed).
	// nil: every dial does a full handshake.
	Sessions SessionCache
}

// Dial opens a DTLS session to addr and returns it as a PacketConn whose
// only peer is addr.
func Dial(ctx context.Context, addr string, c ClientConfig) (*ClientConn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("coaps dial %s: %w", addr, err)
	}
	opts := []dtls.ClientOption{dtls.WithExtendedMasterSecret(dtls.RequestExtendedMasterSecret)}
	if c.Identity != "" {
		key := c.Key
		opts = append(opts,
			dtls.WithPSK(func([]byte) ([]byte, error) { return key, nil }),
			dtls.WithPSKIdentityHint([]byte(c.Identity)),
			dtls.WithCipherSuites(pskSuites...))
	} else {
		opts = append(opts, dtls.WithCipherSuites(certSuites...))
		if c.TLSConfig != nil {
			opts = append(opts,
				dtls.WithRootCAs(c.TLSConfig.RootCAs),
				dtls.WithServerName(c.TLSConfig.ServerName),
				dtls.WithInsecureSkipVerify(c.TLSConfig.InsecureSkipVerify))
		}
	}
	var sess *clientSessions
	if c.Sessions != nil {
		sess = newClientSessions(c.Sessions, c)
		opts = append(opts, dtls.WithSessionStore(sess))
	}
	conn, err := dtls.DialWithOptions("udp", ua, opts...)
	if err != nil {
		return nil, fmt.Errorf("coaps dial %s: %w", addr, err)
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("coaps handshake with %s: %w", addr, err)
	}
	cc := &ClientConn{Conn: conn}
	if sess != nil {
		st, _ := conn.ConnectionState()
		cc.resumed = sess.resumed(st.SessionID)
	}
	return cc, nil
}

// ClientConn is a client's DTLS session as a net.PacketConn whose only
// peer is the server.
type ClientConn struct {
	*dtls.Conn
	resumed bool
}

// Resumed reports whether the handshake resumed a stored session
// (ClientConfig.Sessions) instead of a full handshake.
func (c *ClientConn) Resumed() bool { return c.resumed }

// ReadFrom reads the next datagram from the server.
func (c *ClientConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := c.Read(b)
	return n, c.RemoteAddr(), err
}

// WriteTo sends b to the server (addr is ignored).
func (c *ClientConn) WriteTo(b []byte, _ net.Addr) (int, error) { return c.Write(b) }

// LoadPSKFile reads "identity:key" lines (key in plain text, or hex after
// "0x"); blank lines and '#' comments are skipped. An empty path gives an
// empty map.
func LoadPSKFile(path string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("PSK file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, key, ok := strings.Cut(line, ":")
		if !ok || id == "" || key == "" {
			return nil, fmt.Errorf("PSK file %s line %d: want identity:key", path, n)
		}
		if h, isHex := strings.CutPrefix(key, "0x"); isHex {
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("PSK file %s line %d: bad hex key: %w", path, n, err)
			}
			out[id] = b
		} else {
			out[id] = []byte(key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("PSK file %s: %w", path, err)
	}
	return out, nil
}
