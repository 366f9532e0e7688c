package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/transport/endpoint"
)

// Scheme, Endpoint and the scheme table live in transport/endpoint; these
// aliases keep the names transport's callers already use.
type (
	// Scheme names a URL scheme (endpoint.Scheme).
	Scheme = endpoint.Scheme
	// Endpoint is a parsed URL (endpoint.Endpoint).
	Endpoint = endpoint.Endpoint
)

// MQTT URL schemes (rows of endpoint.Schemes).
const (
	SchemeTCP  = endpoint.SchemeMQTT
	SchemeTLS  = endpoint.SchemeMQTTS
	SchemeWS   = endpoint.SchemeWS
	SchemeWSS  = endpoint.SchemeWSS
	SchemeQUIC = endpoint.SchemeQUIC
)

// DefaultPort returns the default port of a scheme (0 if unknown).
func DefaultPort(s Scheme) int {
	r, _ := endpoint.Lookup(string(s))
	return r.DefaultPort
}

// ParseURL parses a URL with endpoint.Parse. Prefer parsing once where the
// URL enters and passing the Endpoint down (DialEndpoint, ListenEndpoint).
func ParseURL(raw string) (Endpoint, error) { return endpoint.Parse(raw) }

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
	// NextProtos are the ALPN protocols a QUIC listener accepts, in order
	// of preference. Default: the ALPN of the endpoint's scheme row
	// ("mqtt" for quic://); iotq gateway sets any list per route. Dialers
	// offer the ALPN of the endpoint's scheme row (Endpoint.ALPN) instead.
	NextProtos []string
	// Streams configures multi-stream MQTT over QUIC on listeners (client
	// data streams, server delivery streams, datagrams; docs/mqtt-quic.md).
	// The zero value serves one bidirectional stream per connection.
	Streams QUICStreamOptions
	// ClientStreams configures multi-stream MQTT over QUIC on dialers
	// (stream strategy, datagrams; docs/mqtt-quic.md). The zero value uses
	// one bidirectional stream.
	ClientStreams QUICClientStreams
	// VerifySourceAddress (listeners; nil: never) is quic.Transport's
	// hook: true makes the listener answer a new connection from that
	// address with a QUIC Retry (address validation) first. iotq gateway
	// sets it to defend against handshake floods.
	VerifySourceAddress func(net.Addr) bool
	// AcceptConn (listeners; nil: none) is called with each QUIC connection
	// the listener accepts, before its first stream is awaited (the
	// handshake may still be running); it must not block. It may close the
	// connection (CloseWithError): no stream of it is handed out then. iotq
	// gateway counts and limits connections here.
	AcceptConn func(*quic.Conn)
}

// Defaults of QUICOptions.
const (
	DefaultHandshakeIdleTimeout = 20 * time.Second
	DefaultMaxIdleTimeout       = 120 * time.Second
	maxCloseTimeout             = 15 * time.Second
)

// ALPN is the TLS application protocol of MQTT over QUIC
// (endpoint.ALPNMQTT; each QUIC row of the scheme table names its own).
const ALPN = endpoint.ALPNMQTT

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
	if len(q.NextProtos) == 0 {
		q.NextProtos = []string{ALPN}
	}
	return q
}

// DialOptions configure Dial.
type DialOptions struct {
	// TLSConfig is the base TLS configuration for encrypted transports
	// (ClientTLSConfig applies the fields below to a clone). nil means
	// system roots, TLS 1.2 minimum (1.3 for QUIC). NextProtos is set from
	// the scheme table's ALPN where the row names one.
	TLSConfig *tls.Config
	// CAFile is a PEM file with the CA certificates that sign the server's
	// certificate. Default: TLSConfig.RootCAs, else the system roots.
	CAFile string
	// Insecure skips verification of the server's certificate (tests only).
	Insecure bool
	// ServerName is the name checked in the server's certificate. Default:
	// TLSConfig.ServerName, else the URL host.
	ServerName string
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
	// (see internal/certs). For quic, NextProtos is replaced by
	// QUIC.NextProtos (default ALPN).
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

// QUICConn is what QUIC conns (from Dial or a QUIC Listener's Accept) add
// to Conn, for proxies such as iotq gateway.
type QUICConn interface {
	Conn
	// CloseWrite ends the send side of the stream (FIN) and keeps
	// reading; Close must still be called.
	CloseWrite() error
	// CloseWithError closes the QUIC connection at once with an
	// application error code and a reason the peer sees.
	CloseWithError(code uint64, reason string) error
	// HandshakeComplete is closed once the QUIC handshake completed.
	HandshakeComplete() <-chan struct{}
	// Context ends when the QUIC connection ends.
	Context() context.Context
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
	// Multi-stream clients (QUICOptions.ClientStreams) only: the stream
	// strategy, whether datagrams were negotiated, client data streams opened, server-opened streams read,
	// QoS 0 PUBLISH packets sent as datagrams or too large for one (sent on
	// a stream), datagrams received and handed on or dropped.
	StreamStrategy    string `json:"stream_strategy,omitempty"`
	Datagrams         bool   `json:"datagrams,omitempty"` // both ends negotiated datagrams
	DataStreams       uint64 `json:"data_streams,omitempty"`
	ServerStreams     uint64 `json:"server_streams,omitempty"`
	DatagramsSent     uint64 `json:"datagrams_sent,omitempty"`
	DatagramsTooLarge uint64 `json:"datagrams_too_large,omitempty"`
	DatagramsReceived uint64 `json:"datagrams_received,omitempty"`
	DatagramsDropped  uint64 `json:"datagrams_dropped,omitempty"`
}

// ListenHosts returns the hosts that the listen URLs name, leaving out
// unspecified addresses (0.0.0.0, ::) and URLs that do not parse: the names
// a generated server certificate must cover.
func ListenHosts(urls []string) []string {
	var hosts []string
	for _, raw := range urls {
		if ep, err := ParseURL(raw); err == nil && ep.Host != "" {
			if ip := net.ParseIP(ep.Host); ip == nil || !ip.IsUnspecified() {
				hosts = append(hosts, ep.Host)
			}
		}
	}
	return hosts
}
