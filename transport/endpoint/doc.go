// Package endpoint is the one home of iotq's client and listener URLs: the
// scheme table and the Endpoint value a URL is parsed into.
//
// A URL is parsed once, where it enters (the CLI, the Go API, a lab spec),
// into an Endpoint: protocol (mqtt, coap, amqp), transport (tcp, tls, ws,
// wss, quic, udp, dtls), host, port, path and query options. The Endpoint
// then travels down: client.DialEndpoint picks the protocol package by
// Endpoint.Protocol, and transport.DialEndpoint / transport.Listen pick the
// transport by Endpoint.Transport. Nothing below the entry point parses the
// URL again.
//
// The scheme table (Schemes) has one row per URL scheme: protocol,
// transport, default port, TLS yes/no, ALPN, default path and whether a
// path is allowed. A new protocol or transport is a new row, not a new
// switch. Rows exist for every scheme of docs/architecture's wire
// conventions, including CoAP and AMQP; whether a protocol is built into
// the client is decided by client's dialer table, not here.
//
// Concurrency: everything here is a value or a pure function; safe for
// concurrent use.
//
// endpoint imports only the standard library: it is the ground floor shared
// by transport, client, broker and lab.
package endpoint
