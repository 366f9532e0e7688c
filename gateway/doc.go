// Package gateway puts a QUIC front on any TCP broker (an AMQP 1.0 broker,
// Mosquitto, a clustered MQTT broker): `iotq gateway`.
//
// Each Route listens on one QUIC address (through package transport, so
// the QUIC settings, 0-RTT and ticket handling are those of the broker's
// own QUIC listener) with its own ALPN list, and forwards every QUIC
// connection to one of its upstreams over TCP or TLS. Per connection the
// gateway opens the upstream connection, optionally writes a PROXY
// protocol v2 header with the device's address, and joins the first
// bidirectional QUIC stream to it in both directions with half-close:
// a FIN on one side becomes a FIN (CloseWrite) on the other. Each direction
// copies through one bounded buffer, so memory per connection is bounded and
// QUIC and TCP flow control push back on a fast sender. Early (0-RTT) data
// is read and forwarded as soon as the upstream connection is up; whether
// 0-RTT is accepted at all is the route's replay policy (accept, refuse,
// accept only for the ALPNs whose replay risk is documented as
// acceptable, or hold: for mqtt only CONNECT is forwarded before the
// handshake completes; docs/gateway.md). When no upstream answers, the QUIC
// connection is closed with application error CodeUpstreamUnavailable.
//
// Limits (docs/gateway.md): a client must send its first bytes within
// FirstDataTimeout of the handshake (no upstream connection before them);
// a connection through which no application data flowed for
// DataIdleTimeout (QUIC PINGs do not count) or whose second direction did
// not end within HalfCloseTimeout of the first is closed; connections past
// MaxConnections or MaxConnectionsPerSource are refused with
// CodeConnectionLimit; under a handshake flood (or always) new connections
// go through a QUIC Retry.
//
// Session ticket keys come from the state directory (one set per
// instance) or from TLSOptions.TicketKeysFile, which several instances
// behind one address share so a client resumes with 0-RTT at any of them;
// a running gateway rereads that file when it changes (docs/deploy.md).
//
// Lifecycle: New validates Options and prepares TLS; Start opens every
// listener (and the metrics server) and returns; Close stops accepting,
// aborts the connections in flight (CodeShutdown) and waits for every
// goroutine the gateway started. A Gateway is safe for concurrent use.
//
// gateway imports transport and internal packages only; never broker or
// client.
package gateway
