// Package amqp implements the common client API (package client) for AMQP
// 1.0 with github.com/Azure/go-amqp, over a net.Conn from package
// transport: amqp:// (TCP), amqps:// (TLS) and amqp+quic:// (one QUIC
// stream, ALPN "amqp", through `iotq gateway` to a TCP AMQP broker).
//
// Mapping of the common API:
//   - Publish: one sender link per address (attached on first use). QoS 0
//     is at-most-once: the transfer is pre-settled and the Receipt completes
//     when it was written. QoS 1 is at-least-once: the transfer is unsettled
//     and the Receipt completes when the broker's disposition arrives,
//     accepted (nil) or rejected/released/modified (an error). QoS 2 is
//     refused: AMQP's exactly-once (receiver settle mode second) is not
//     offered by the brokers iotq tests against.
//   - Subscribe: one receiver link with credit (Options of the URL,
//     default 100) on the address; every message is accepted after the
//     handler returned. On ActiveMQ Artemis a plain address is multicast,
//     so every subscriber gets every message; RabbitMQ 3.x needs the
//     /topic/ prefix (URL option prefix=/topic/).
//   - Topics are AMQP addresses, used as given (after the optional
//     prefix). AMQP has no MQTT wildcards: a filter with + or # is refused.
//   - ConnectionInfo: TransportReady from the transport, Connack = the AMQP
//     open exchange done, LinkAttached and FirstTransfer, TLS resumption
//     and 0-RTT from the transport.
//
// Pipelined start (Options.Early, pipeline.go): the client writes the
// protocol headers, sasl-init, open, begin, attach of a sender link and
// the transfer of the early message in one write, without waiting for a
// reply (AMQP 1.0 part 2 section 2.4.1 allows it), so over amqp+quic with a
// ticket the whole start rides in the 0-RTT flight. go-amqp then runs its
// usual start on the same connection; a wrapping conn swallows its writes
// of what was already sent (after checking they say the same), holds back
// a begin or attach reply until go-amqp has sent its own, and reads the
// broker's disposition of the early transfer: with EarlyMessage.QoS 1 the
// receipt (EarlyMessage.Receipt) completes on it; with QoS 0 when the
// flight was written. The gateway's replay policy decides whether the
// flight is taken as 0-RTT (docs/amqp.md, docs/gateway.md).
// Without Options.Early go-amqp runs the start strictly in turn and only
// the first protocol header rides in the 0-RTT flight.
//
// URL options (?key=value): prefix (address prefix, e.g. /topic/),
// credit (receiver link credit, default 100), sasl (anonymous by default,
// plain when a username is given, none to skip SASL).
//
// Concurrency: a client is safe for concurrent use. It owns one goroutine
// per subscription (receiving), one dispatcher that calls handlers in
// arrival order, and one per pending at-least-once receipt; Close stops
// and waits for all of them.
//
// Imports: transport, client/internal/core, go-amqp; never broker.
package amqp
