// Package measure generates and measures iotq's measurement traffic over
// the common client API (package client), whatever the protocol and
// transport underneath.
//
// Publisher publishes Count messages on one topic: fixed bodies, or
// measurement payloads (internal/payload: sequence number, send time taken
// just before the hand-over, and a run id per Publisher) padded to Size
// bytes. Messages leave every Interval, back to back, or one per value of a
// Gate channel (stop-and-wait). With Early, message 0 is prepared before the
// dial and rides in the same write as CONNECT. Each message's outcome (its
// Receipt) is reported in publish order through OnResult.
//
// MultiPublisher (E9, head-of-line blocking) publishes over one connection
// on several periodic topics, their phases spread over the interval, and
// optionally a large-message topic beside them; the sequence numbers count
// across all topics (MultiTopicOptions.Schedule), each topic is published
// from a goroutine of its own, and each Result names its topic.
//
// Receiver turns received messages into observations: one-way delay
// (receive time minus the send time in the payload; publisher and receiver
// must share a clock) and whether the message is a duplicate of one already
// seen (same topic, publisher run and sequence number).
//
// cmd/iotq pub and sub are wiring around these two; record files and stats
// JSON are written there through package records.
//
// Concurrency: a Publisher or MultiPublisher runs once (Run); it owns the
// goroutines that publish and wait for receipts and stops them before Run
// returns. OnResult is called from a receipt goroutine, one call at a
// time. A Receiver is not safe for
// concurrent use: call Observe from one goroutine (a client's handler
// goroutine is one).
//
// measure imports client, internal/payload and records (the topic names
// vocabulary); never broker, lab or link.
package measure
