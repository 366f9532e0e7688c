// Package client is iotq's common publish/subscribe API: one Client
// interface whatever the protocol and transport underneath.
//
//	c, err := client.Dial(ctx, "quic://broker:14567", client.Options{CAFile: "ca.pem"})
//	r, err := c.Publish(ctx, "sensors/1", payload, client.PublishOptions{QoS: 1})
//	err = r.Wait(ctx) // nil once the broker acknowledged (PUBACK)
//
// Publish returns a Receipt at once: "publish, then ask whether it
// succeeded". The Receipt completes when the message was accepted (the
// broker's acknowledgement for QoS 1 and 2, the hand-over to the transport
// for QoS 0) or failed, and carries the time of that event.
//
// A URL is parsed once (ParseURL, or Dial does it) into an Endpoint from
// transport/endpoint's scheme table; DialEndpoint picks the implementation
// by Endpoint.Protocol from a small dialer table: mqtt://, mqtts://, ws://,
// wss:// and quic:// go to client/mqtt (MQTT 3.1.1 or 5); coap://, coaps://,
// coap+tcp://, coaps+tcp:// and coap+quic:// go to client/coap; amqp://,
// amqps:// and amqp+quic:// go to client/amqp. A scheme whose protocol is
// not in the dialer table fails with ErrProtocolNotBuilt. A protocol
// package implements a DialFunc (one row of the table) and opens its
// connection with core.DialTransport (one TLS builder, session cache, one
// hint per error). The types are defined in client/internal/core (so
// that implementations can use them without an import cycle) and are
// aliased here; use them through this package.
//
// Not every protocol can do everything: QoS 2 and wildcard filters (+, #)
// are MQTT only; client/coap and client/amqp refuse them at once with an
// error naming the feature (coap.ErrQoS2, amqp.ErrQoS2, amqp.ErrWildcard).
// The contract every implementation keeps (receipts, ConnectionInfo,
// ErrClosed after Close, a receipt that ends with an error when its
// broker goes away) is one table-driven suite, client/contracttest, run
// by each protocol package's TestContract on every transport it supports,
// each row declaring its capabilities.
//
// Concurrency: a Client is safe for concurrent use; subscription handlers
// of one client run one at a time on a goroutine the client owns. Close
// stops every goroutine the client started.
//
// client imports transport and its own sub-packages; it never imports broker
// and contains no paho import (that lives in client/mqtt).
package client
