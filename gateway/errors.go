package gateway

import (
	"errors"

	"github.com/iotq/iotq/transport"
)

// Sentinel errors.
var (
	// ErrClosed: the gateway was closed.
	ErrClosed = errors.New("gateway closed")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("gateway already started")
	// ErrNotStarted: Ready was called before Start.
	ErrNotStarted = errors.New("gateway not started")
	// ErrNoUpstream: no upstream of a route accepted the connection.
	ErrNoUpstream = errors.New("no upstream reachable")
)

// QUIC application error codes the gateway closes connections with. The
// client sees them as a *quic.ApplicationError with Remote set.
const (
	// CodeNoError: the forwarded connection ended normally.
	CodeNoError uint64 = 0
	// CodeUpstreamUnavailable: no upstream accepted the TCP (or TLS)
	// connection, or the PROXY header could not be written.
	CodeUpstreamUnavailable uint64 = 0x101
	// CodeUpstreamReset: the upstream connection failed (reset, TLS error)
	// while forwarding.
	CodeUpstreamReset uint64 = 0x102
	// CodeShutdown: the gateway is shutting down.
	CodeShutdown uint64 = 0x103
	// CodeStreamError: reading from or writing to the client's stream
	// failed (the upstream connection was closed).
	CodeStreamError uint64 = 0x104
	// CodeStreamLimit: the client opened a second stream (a multi-stream
	// MQTT over QUIC client: data streams, per-topic or per-publish). A
	// route forwards one bidirectional stream per connection; the reason
	// phrase says so (docs/mqtt-quic.md).
	CodeStreamLimit uint64 = transport.QUICCodeStreamLimit
	// CodeConnectionLimit: the connection was refused because the gateway
	// holds MaxConnections connections, or MaxConnectionsPerSource from the
	// client's address; the reason names the limit.
	CodeConnectionLimit uint64 = 0x105
	// CodeFirstDataTimeout: the client sent no application data within
	// FirstDataTimeout of the handshake (no upstream connection was made).
	CodeFirstDataTimeout uint64 = 0x106
	// CodeIdleTimeout: no application data flowed in either direction for
	// DataIdleTimeout (QUIC PINGs do not count).
	CodeIdleTimeout uint64 = 0x107
	// CodeHalfCloseTimeout: one side ended its sending direction and the
	// other did not end its own within HalfCloseTimeout.
	CodeHalfCloseTimeout uint64 = 0x108
)
