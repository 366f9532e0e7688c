// Package broker is iotq's embedded MQTT broker: MQTT 3.1.1 and 5.0 over
// every transport of package transport (mqtt://, mqtts://, ws://, wss://,
// quic://) at the same time, with optional password/ACL authentication,
// persistence of sessions, in-flight and retained messages in a state
// directory, Prometheus metrics and an explicit slow-consumer policy.
//
// The MQTT engine sits behind the small interface of package broker/engine;
// listeners, configuration, auth and metrics talk to that interface only, so
// the engine can be replaced. Package broker/mochi implements it on the
// patched mochi-mqtt fork in internal/mqttcore; only New names it.
//
// Lifecycle: New(Options) validates and returns a *Server; Start(ctx) opens
// every listener and returns without blocking; Ready reports when all
// listeners accept; Endpoints/Addrs give the real ports (port 0 picks a free
// one); Close stops accepting, disconnects clients with "server shutting
// down", waits for them (bounded), flushes the store and is idempotent.
//
// Concurrency: a Server is safe for concurrent use. The Server owns one
// accept goroutine per listener and one flow-control goroutine; the engine
// owns two goroutines per client (reader and writer). Close stops and waits
// for all of them. Hooks never block except the deliberate, bounded
// backpressure wait of the slow-consumer policy (see Options.Flow).
//
// Other protocol fronts in iotq (CoAP) reach the topic space through
// Server.Publish and Server.Subscribe (topicspace.go), not through MQTT:
// a published Message reaches MQTT and local subscribers alike.
//
// broker imports transport and internal packages; it never imports client,
// link, lab or report.
package broker
