// Package mochi is the adapter between iotq's broker and its MQTT engine,
// the patched mochi-mqtt fork in internal/mqttcore: it implements
// broker/engine's Engine on mqttcore.Server. The engine's behaviour is shaped
// by hooks, each in its own file: authHook (hook_auth.go: CONNECT checks and
// the ACL), flowHook (hook_flow.go: backpressure and the slow-consumer
// policy), receiveMaxHook (hook_receivemax.go: Receive Maximum, with a
// DISCONNECT the client can read) and storeHook (store.go, storecodec.go: persistence with
// group commit). enginelog.go turns mqttcore's logs into iotq's (Info to
// Debug, repeated Warn/Error rate-limited).
//
// Only package broker imports this package (internal/archtest holds that);
// everything else sees the engine through broker.Server.
package mochi
