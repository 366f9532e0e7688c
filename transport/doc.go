// Package transport is every way bytes travel between iotq clients and
// brokers: MQTT over TCP (mqtt://), TLS (mqtts://), WebSocket (ws://, wss://,
// path /mqtt) and QUIC (quic://, ALPN "mqtt", one client-opened bidirectional
// stream per session, 0-RTT with a persistent session-ticket cache).
//
// Dial and Listen take URLs. Every transport yields a net.Conn, so neither
// the broker nor the client knows which transport is underneath. Conn adds
// connection facts (timings, TLS resumption, 0-RTT, QUIC statistics).
//
// Concurrency: a Listener is safe for concurrent use. A Conn follows net.Conn
// rules (one reader and one writer at a time; QUIC conns serialise writes
// internally so concurrent Write calls are safe).
//
// transport imports neither broker nor client.
package transport
