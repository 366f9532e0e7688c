// Package contracttest is the contract of the common client API (package
// client) as one table-driven test suite: Run executes the same cases,
// unchanged, against every row it is given, one row per protocol x
// transport (and protocol version) an implementation supports.
//
// A Row names an endpoint URL, the options to dial it with, what
// ConnectionInfo must report, and the row's Capabilities: what the
// protocol cannot do (QoS 2, wildcard filters) is declared there and the
// suite then checks that the refusal is a clear error, instead of cases
// testing scheme names. Each protocol package feeds the suite from its
// own tests (client/mqtt, client/coap, client/amqp: contract_test.go),
// starting the real servers it needs (our broker through
// broker/brokertest, ActiveMQ Artemis through internal/testutil), so that
// this package imports neither a broker nor a protocol package.
//
// The cases:
//   - pubsub: subscribe, then publish QoS 0 and QoS 1; the subscriber gets
//     payload and topic.
//   - receipts: a QoS 1 receipt completes with nil and an acceptance time
//     not before the publish; a QoS 0 receipt completes when written.
//   - info: ConnectionInfo names the protocol and the URL's scheme, and
//     DialStart <= TransportReady <= Connack.
//   - close: Publish and Subscribe after Close fail with client.ErrClosed,
//     Done is closed, Err is ErrClosed, a second Close returns nil.
//   - qos2 and wildcards: work where the row has the capability, fail at
//     once with an error that names the feature where it has not.
//   - broker-gone: a client dialled through a relay (relay.go) publishes
//     QoS 1 while the relay black-holes traffic, then the relay vanishes
//     (TCP: its sockets close; UDP: its socket closes, so nothing
//     answers); the pending receipt must end with an error within
//     Capabilities.LossBound, not hang, wrapping Capabilities.LossErr;
//     where the row has a Connection, Done closes and Err wraps
//     client.ErrConnectionLost.
//   - close-pending: a receipt pending (relay frozen) when Close is
//     called ends with client.ErrClosed, and Close returns.
//
// Only tests import this package (internal/archtest checks it).
package contracttest
