// Package mqtt implements the common client API (package client) for MQTT
// 3.1.1, with eclipse/paho.mqtt.golang, and MQTT 5.0, with
// eclipse/paho.golang, over every transport of package transport (mqtt://,
// mqtts://, ws://, wss://, quic://). The transport is dialled by transport.Dial
// and handed to paho as a net.Conn, so paho never knows which one it is.
// Over QUIC, Options.QUIC.ClientStreams makes that conn multi-stream
// (PUBLISH per topic or per message on its own stream, QoS 0 as QUIC
// datagrams; transport/quicclient.go, docs/mqtt-quic.md): paho still reads
// and writes one connection. Over QUIC, Migrate moves a client to a new
// local address without reconnecting (docs/mqtt-quic.md, "Connection
// migration").
//
// What this package adds to paho:
//   - Receipts: Publish returns at once with a Receipt that completes on
//     PUBACK (QoS 1) or PUBCOMP (QoS 2), or when the packet was handed to
//     the transport (QoS 0), with the time of that event.
//   - Connection facts: dial start, transport ready, CONNACK arrival (the
//     first bytes read from the broker), TLS resumption, QUIC 0-RTT and
//     QUIC statistics.
//   - One subscription dispatcher for both versions (inbox.go): messages
//     are matched against the client's filters and passed to the handlers
//     in arrival order from one goroutine; a QoS 1/2 message is
//     acknowledged only after its handlers returned (paho acknowledges
//     nothing by itself). It exists before CONNECT, so the messages a
//     persistent session's broker sends right behind CONNACK are held,
//     unacknowledged and bounded, until Subscribe registers a matching
//     filter; what is still held at Close the broker sends again to the
//     session's next connection.
//   - Errors that say what to check when a connection fails.
//
// No automatic reconnection: when the connection is lost, Done is closed,
// pending receipts fail with client.ErrConnectionLost and the caller decides
// what to do (a measurement must see the loss).
//
// paho waits for CONNACK before it sends a PUBLISH, so over QUIC 0-RTT only
// the CONNECT rides in the first flight; the first PUBLISH leaves after the
// CONNACK.
//
// Concurrency: a client is safe for concurrent use. It owns the goroutines
// of its paho client, its dispatcher and one per pending receipt (MQTT
// 3.1.1: every publish until its token completes; MQTT 5: every QoS 1/2
// publish until its acknowledgement); Close stops and waits for all of
// them (the dispatcher after the handler it runs, so a handler must not
// call Close), except an MQTT 3.1.1 hand-over stuck inside paho's Publish
// because the connection died under it, which paho ends by itself within
// AckTimeout (its WriteTimeout) and offers no way to interrupt; Publish
// itself returns at once when the connection ends. paho.golang writes one
// packet as several Writes under the conn's sync.Locker; the conn gathers
// them into one transport write per packet.
//
// Imports: transport, client/internal/core, paho; never broker.
package mqtt
