// Package coap implements iotq's common client API (package client) over
// CoAP: coap:// (UDP), coaps:// (DTLS 1.2), coap+tcp://, coaps+tcp://
// (RFC 8323) and coap+quic:// (experimental: RFC 8323 framing on one QUIC
// stream, ALPN "coap-quic-exp").
//
// Mapping: a topic is the resource /t/<topic> of the iotq broker (its
// direct path form; ?prefix= in the URL changes "t"). Publish is a PUT:
// QoS 0 sends it non-confirmable and completes the receipt when written;
// QoS 1 sends it confirmable and completes the receipt with the
// acknowledgement (UDP/DTLS) or the response (streams: within AckTimeout,
// and a request pending when the connection ends fails with its error,
// ErrConnectionLost or ErrClosed); QoS 2 is refused with ErrQoS2 (CoAP
// has no exactly-once delivery). Subscribe is a GET
// with Observe (RFC 7641); CoAP observation delivers state, not every
// event: notifications may be coalesced by the server. Over UDP and DTLS the
// message layer is transport/coapmsg (RFC 7252 back-off, parameters from
// the URL query, e.g. coap://h:5683?ack_timeout=1s&max_retransmit=4&cocoa=1).
// A confirmable publication that exhausts its retransmissions fails with
// coapmsg.ErrTimeout.
//
// Resumption: with Options.SessionCacheFile a coaps client keeps its DTLS
// session (ID and master secret, in the same file as TLS/QUIC tickets) and
// resumes it on the next dial, in this process or another (abbreviated
// handshake: one round trip instead of three); coaps+tcp resumes TLS and
// coap+quic resumes QUIC with 0-RTT. ConnectionInfo.TLSResumed tells
// whether the server took the session; TransportReady is the end of the
// DTLS/TLS/QUIC handshake, Connack the answer to the first CoAP ping (UDP,
// DTLS) or the server's CSM (streams).
//
// Concurrency: a Client is safe for concurrent use; handlers run one at a
// time on a goroutine the client owns; Close stops every goroutine.
package coap
