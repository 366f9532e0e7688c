package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Scheme names a transport.
type Scheme string

// Supported URL schemes.
const (
	SchemeTCP  Scheme = "mqtt"
	SchemeTLS  Scheme = "mqtts"
	SchemeWS   Scheme = "ws"
	SchemeWSS  Scheme = "wss"
	SchemeQUIC Scheme = "quic"
)

// DefaultPort returns the default port of a scheme.
func DefaultPort(s Scheme) int {
	switch s {
	case SchemeTCP:
		return 1883
	case SchemeTLS:
		return 8883
	case SchemeWS:
		return 8083
	case SchemeWSS:
		return 8084
	case SchemeQUIC:
		return 14567
	}
	return 0
}

// Endpoint is a parsed transport URL.
type Endpoint struct {
	Scheme Scheme
	Host   string // host without port; may be empty for "all interfaces" when listening
	Port   int
	Path   string // WebSocket path, "/mqtt" by default
}

// Address returns host:port.
func (e Endpoint) Address() string { return net.JoinHostPort(e.Host, fmt.Sprint(e.Port)) }

// String returns the canonical URL.
func (e Endpoint) String() string {
	u := url.URL{Scheme: string(e.Scheme), Host: e.Address()}
	if e.Scheme == SchemeWS || e.Scheme == SchemeWSS {
		u.Path = e.Path
	}
	return u.String()
}

// ParseURL parses a transport URL such as "quic://127.0.0.1:14567" and fills
// in the default port and WebSocket path. The error says what was wrong.
func ParseURL(raw string) (Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, fmt.Errorf("transport URL %q: %w", raw, err)
	}
	s := Scheme(strings.ToLower(u.Scheme))
	switch s {
	case SchemeTCP, SchemeTLS, SchemeWS, SchemeWSS, SchemeQUIC:
	case "tcp":
		s = SchemeTCP
	case "tls", "ssl":
		s = SchemeTLS
	default:
		return Endpoint{}, fmt.Errorf("transport URL %q: unknown scheme %q (want mqtt, mqtts, ws, wss or quic)", raw, u.Scheme)
	}
	if u.Opaque != "" || (u.Host == "" && !strings.Contains(raw, "://")) {
		return Endpoint{}, fmt.Errorf("transport URL %q: want %s://HOST[:PORT]", raw, s)
	}
	ep := Endpoint{Scheme: s, Host: u.Hostname(), Port: DefaultPort(s), Path: u.Path}
	if !validHost(ep.Host) {
		return Endpoint{}, fmt.Errorf("transport URL %q: bad host %q (want a DNS name or an IP address)", raw, ep.Host)
	}
	if p := u.Port(); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil || port < 0 || port > 65535 {
			return Endpoint{}, fmt.Errorf("transport URL %q: bad port %q (want 0-65535)", raw, p)
		}
		ep.Port = port
	}
	switch {
	case s == SchemeWS || s == SchemeWSS:
		if ep.Path == "" {
			ep.Path = "/mqtt"
		}
	case ep.Path == "/":
		ep.Path = ""
	case ep.Path != "":
		return Endpoint{}, fmt.Errorf("transport URL %q: a path (%q) only applies to ws:// and wss://; remove it", raw, ep.Path)
	}
	return ep, nil
}

// validHost accepts "", DNS names (letters, digits, '-', '_', '.') and IP
// addresses, IPv6 with an optional zone made of name characters.
func validHost(h string) bool {
	if h == "" {
		return true
	}
	if len(h) > 253 {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return nameChars(a.Zone())
	}
	return !strings.Contains(h, ":") && nameChars(h)
}

func nameChars(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// QUICOptions tune QUIC for lossy, high-latency links. Zero values mean the
// documented defaults.
type QUICOptions struct {
	// HandshakeIdleTimeout bounds the handshake. Default 20s, enough for a
	// 600 ms one-way satellite link with loss (quic-go's own default is 5s).
	// Listeners also use it to bound server-side TLS handshakes (mqtts) and
	// the wait for a QUIC connection's first stream.
	HandshakeIdleTimeout time.Duration
	// MaxIdleTimeout closes a silent connection. Default 120s.
	MaxIdleTimeout time.Duration
	// KeepAlivePeriod sends keep-alives; 0 means none (MQTT has PINGREQ).
	KeepAlivePeriod time.Duration
	// Refuse0RTT makes a listener refuse early data (clients then complete a
	// full handshake). By default 0-RTT is accepted: see docs/0rtt.md for the
	// replay policy.
	Refuse0RTT bool
	// Disable0RTT makes a dialer never attempt 0-RTT (it still resumes
	// sessions from DialOptions.SessionCache).
	Disable0RTT bool
	// CloseTimeout bounds how long Close of a QUIC conn waits for the peer
	// to read what was written (see Conn). Default: 1s + 4 x smoothed RTT,
	// at most 15s.
	CloseTimeout time.Duration
}

// Defaults of QUICOptions.
const (
	DefaultHandshakeIdleTimeout = 20 * time.Second
	DefaultMaxIdleTimeout       = 120 * time.Second
	maxCloseTimeout             = 15 * time.Second
)

// ALPN is the TLS application protocol of MQTT over QUIC.
const ALPN = "mqtt"

// WebSocket subprotocols: clients offer WSSubprotocol; listeners accept it
// and the legacy "mqttv3.1".
const (
	WSSubprotocol       = "mqtt"
	WSSubprotocolLegacy = "mqttv3.1"
)

func (q QUICOptions) withDefaults() QUICOptions {
	if q.HandshakeIdleTimeout <= 0 {
		q.HandshakeIdleTimeout = DefaultHandshakeIdleTimeout
	}
	if q.MaxIdleTimeout <= 0 {
		q.MaxIdleTimeout = DefaultMaxIdleTimeout
	}
	if q.KeepAlivePeriod < 0 {
		q.KeepAlivePeriod = 0
	}
	return q
}

// DialOptions configure Dial.
type DialOptions struct {
	// TLSConfig for mqtts, wss and quic. nil means system roots. ServerName
	// defaults to the URL host. NextProtos is set by the transport for QUIC.
	TLSConfig *tls.Config
	// SessionCache, if set, is used for TLS and QUIC session resumption
	// (and QUIC 0-RTT). Dial keys entries by scheme and address, so one
	// cache (for example one FileSessionCache) can serve every transport.
	// It overrides TLSConfig.ClientSessionCache.
	SessionCache tls.ClientSessionCache
	QUIC         QUICOptions
	Logger       *slog.Logger // nil: discard
}

// ListenOptions configure Listen.
type ListenOptions struct {
	// TLSConfig with the server certificate, required for mqtts, wss, quic
	// (see internal/certs). For quic, NextProtos is replaced by ALPN.
	// Install persistent ticket keys (SetSessionTicketKeys) for resumption
	// and 0-RTT across restarts.
	TLSConfig *tls.Config
	QUIC      QUICOptions
	Logger    *slog.Logger // nil: discard
}

// Listener accepts connections of one transport. Safe for concurrent use.
type Listener interface {
	// Accept waits for the next connection (for QUIC: the first
	// client-opened bidirectional stream of a new QUIC connection).
	Accept(ctx context.Context) (net.Conn, error)
	// Addr is the bound address (the real port when listening on port 0).
	Addr() net.Addr
	// Endpoint is the URL actually served (with the real port).
	Endpoint() Endpoint
	// Close stops accepting and closes the underlying socket. Idempotent.
	Close() error
}

// Info describes an established client connection.
//
// Timings: DialStart is when Dial began. TransportReady is when the conn
// could first carry application data: TCP connected (mqtt), TLS handshake
// done (mqtts), WebSocket upgrade done (ws, wss), and for QUIC when Dial
// returned: at once with 0-RTT, else after the handshake. HandshakeDone is
// when the TLS or QUIC handshake completed (zero for mqtt and ws).
type Info struct {
	Scheme          Scheme
	DialStart       time.Time // when Dial began
	TransportReady  time.Time // TCP connected + TLS/WS/QUIC handshake done (QUIC 0-RTT: when the conn may send)
	HandshakeDone   time.Time // cryptographic handshake confirmed (zero for plain TCP)
	TLSResumed      bool      // TLS or QUIC session was resumed from a ticket
	Used0RTT        bool      // QUIC early data was accepted by the server
	Rejected0RTT    bool      // 0-RTT was attempted but rejected (we fell back to 1-RTT)
	NegotiatedProto string    // ALPN
}

// Conn is a client connection with connection facts.
type Conn interface {
	net.Conn
	// Info returns connection facts. For every transport except QUIC they
	// are final when Dial returns. For QUIC, Info waits until the handshake
	// has completed (at most the handshake idle timeout, or until the conn
	// closes), so Used0RTT, Rejected0RTT, TLSResumed and HandshakeDone are
	// final; Rejected0RTT also becomes true later if a stream operation
	// fell back. With 0-RTT, calling Info right after Dial therefore costs
	// one round trip; call it after the first response was read.
	Info() Info
	// QUICStats returns QUIC path statistics; ok is false for other
	// transports.
	QUICStats() (QUICStats, bool)
}

// QUICStats is a snapshot of QUIC connection statistics.
type QUICStats struct {
	SmoothedRTT   time.Duration `json:"smoothed_rtt_ns"`
	MinRTT        time.Duration `json:"min_rtt_ns"`
	LatestRTT     time.Duration `json:"latest_rtt_ns"`
	BytesSent     uint64        `json:"bytes_sent"`
	BytesReceived uint64        `json:"bytes_received"`
	PacketsSent   uint64        `json:"packets_sent"`
	PacketsLost   uint64        `json:"packets_lost"`
}
