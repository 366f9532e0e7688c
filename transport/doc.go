// Package transport is every way bytes travel between iotq clients and
// brokers: MQTT over TCP (mqtt://), TLS (mqtts://), WebSocket (ws://, wss://,
// path /mqtt, subprotocol "mqtt", binary frames) and QUIC (quic://, ALPN
// "mqtt", one client-opened bidirectional stream per session, 0-RTT with a
// persistent session-ticket cache, FileSessionCache).
//
// URLs are parsed once into an endpoint.Endpoint (package transport/endpoint
// holds the scheme table: protocol, transport, default port, TLS, ALPN,
// default path per scheme). DialEndpoint and ListenEndpoint dispatch on
// Endpoint.Transport and take TLS and ALPN from the row, so a scheme of
// another protocol (coaps+tcp, coap+quic, amqp+quic) needs no switch of its
// own; Dial and Listen also take URL strings for convenience. ClientTLSConfig is
// the one builder of client TLS configurations. Dial errors are
// *DialError values whose kind (ErrRefused, ErrTimeout, ErrCertificate,
// ErrALPN, ...) is found by type, never by message text, and whose message
// carries exactly one hint. Rows of the table whose transport is not built
// here yet (udp, dtls) fail with ErrTransportNotBuilt. Every transport yields a net.Conn,
// so neither the broker nor the client knows which transport is underneath.
// Conn adds connection facts (timings, TLS resumption, 0-RTT, QUIC
// statistics); StatsOf reads QUIC statistics of any conn.
//
// QUIC: the listener uses quic-go's early listener and accepts 0-RTT unless
// QUICOptions.Refuse0RTT is set (replay policy: docs/0rtt.md). The client
// dials with 0-RTT when its session cache holds a ticket; if the server
// rejects the early data, the conn re-sends it over the 1-RTT connection
// without the caller noticing and reports Info.Rejected0RTT. Closing a QUIC
// conn ends the stream, waits (bounded) until the peer has read everything,
// then closes the QUIC connection. QUIC conns also implement QUICConn, for
// proxies (iotq gateway): CloseWrite (half-close), CloseWithError (an
// application error code the peer sees), HandshakeComplete; a listener
// accepts the ALPNs of QUICOptions.NextProtos.
//
// Concurrency and ownership: a Listener is safe for concurrent use; it owns
// its goroutines (an accept loop, plus per-connection handshake goroutines
// for mqtts and quic) and Close stops and waits for them. Conns that were
// accepted belong to the caller and outlive the Listener. A Conn follows
// net.Conn rules; Write is safe for concurrent use on every transport
// (ws and quic serialise writes internally). A client QUIC conn runs one
// goroutine until its handshake ends; Close waits for it.
//
// transport imports neither broker nor client; from iotq only
// transport/endpoint and internal packages (tests use internal/certs).
package transport
