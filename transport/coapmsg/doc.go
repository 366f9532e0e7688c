// Package coapmsg is iotq's CoAP message layer for UDP and DTLS (RFC 7252
// section 4): confirmable (CON), non-confirmable (NON), acknowledgement
// (ACK) and reset (RST) messages, message IDs, tokens, retransmission with
// randomised exponential back-off, NSTART, and deduplication of received
// messages for EXCHANGE_LIFETIME (CON) or NON_LIFETIME (NON). Congestion
// control is RFC 7252's default or, as an option, CoCoA
// (draft-ietf-core-cocoa-03). Every parameter of RFC 7252 section 4.8 is
// configurable (Params).
//
// An Endpoint owns one datagram socket (net.PacketConn: a UDP socket or a
// DTLS adaptor). Both the broker's CoAP front and client/coap use it: a
// server passes a Handler that answers requests (piggy-backed on the ACK for
// CON requests); a client sends requests with Send and receives responses
// and notifications through token handlers (HandleToken).
//
// Why our own layer: plgd-dev/go-coap v3.5.4 is used for the codecs (message
// encoding and decoding, options), but not for reliability. Its
// retransmission fires at ACK_TIMEOUT*(n+1) — 2, 4, 6, 8 s, linear, with no
// ACK_RANDOM_FACTOR and no doubling — checked by a periodic runner that
// ticks every 4 s by default, and a request whose retransmissions are
// exhausted does not fail (it waits for its context). RFC 7252 requires an
// initial timeout drawn uniformly from [ACK_TIMEOUT,
// ACK_TIMEOUT*ACK_RANDOM_FACTOR], doubled after each retransmission (with
// the defaults: transmissions at T0, 3T0, 7T0, 15T0 after the first, give up
// at 31T0 = 62-93 s). iotq measures delay against loss, so the schedule must
// be the RFC's; this package implements it with timers per exchange and
// reports an exhausted exchange as ErrTimeout.
//
// Concurrency: an Endpoint is safe for concurrent use. It owns one read
// goroutine and the goroutines that run the Handler (bounded by
// Options.MaxHandlers); Close stops and waits for them. Completion
// callbacks (Send's done, token handlers) run on the endpoint's goroutines
// and must not block.
//
// coapmsg imports no iotq package.
package coapmsg
