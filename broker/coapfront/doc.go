// Package coapfront is the broker's CoAP front: CoAP clients publish and
// observe on the same topic space as MQTT clients. A CoAP publication
// reaches MQTT subscribers of that topic and an MQTT publication notifies
// CoAP observers; the topic's latest value (whoever published it) is what a
// GET reads and what a new observer receives first.
//
// Resources (see docs/coap.md):
//   - /.well-known/core: discovery, with rt= filtering (rt=core.ps finds the
//     topic collection), per draft-ietf-core-coap-pubsub-21.
//   - /ps: the topic collection. GET lists topics (?rt=core.ps.data lists
//     topic-data resources); POST with a CBOR map of topic properties
//     (integer keys; Content-Format Options.ContentFormat, 65000 by default
//     until IANA assigns one) creates a topic whose topic-name is the MQTT
//     topic; FETCH with a property map lists the matching topics.
//   - /ps/<id>: topic configuration (GET, FETCH, POST, iPATCH, DELETE).
//     The properties (CBOR, github.com/fxamacker/cbor/v2) are enforced
//     (props.go): expiration-date deletes the topic, max-subscribers limits
//     Observe registrations (lowering it removes observers),
//     topic-content-format refuses other formats, observer-check sets the
//     CON notification interval.
//   - /ps/data/<id> (or the path the client chose as topic-data): topic
//     data. PUT publishes (2.01 Created for the first value, 2.04 Changed
//     later), GET reads the latest value, GET with Observe subscribes
//     (RFC 7641), DELETE clears the value (observers get 4.04). Responses
//     and notifications carry the topic's topic-content-format.
//   - /t/<mqtt/topic>: the direct form, no creation needed, so a bare
//     coap-client can publish and observe any MQTT topic; same methods.
//
// Transports: coap:// and coaps:// run on the message layer of
// transport/coapmsg (RFC 7252 reliability, deduplication, 4.02/RST for bad
// messages); coap+tcp://, coaps+tcp:// and coap+quic:// (experimental) use
// RFC 8323 framing with CSM, Ping/Pong, Release and Abort (ServeStream).
// Notifications are confirmable when the observer registered with a CON
// request (Options.Notifications), one at a time per observer; a newer value
// replaces one still waiting (state semantics); an observer whose
// confirmable notification is not acknowledged, or who answers with RST, is
// removed. Large values go block-wise (RFC 7959, Block1 uploads, Block2
// downloads and notifications).
//
// The front talks to the broker through the small Topics interface (publish,
// subscribe with a callback, ACL check); the PSK identity of a coaps client
// is its ACL user, other clients are anonymous.
//
// Concurrency: a Front is safe for concurrent use; it owns the goroutines of
// its endpoints and stream sessions and Close stops them.
package coapfront
