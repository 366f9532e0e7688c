// Package engine is the contract between iotq's broker and the MQTT engine
// behind it: the Engine interface, the Config every engine is built from,
// the Authorizer and Observer the broker hands it, the Message of the topic
// space, and the names of drop reasons and refusals that metrics export.
//
// Package broker (listeners, configuration, auth, metrics, the CoAP front)
// talks to this interface only; package broker/mochi implements it on the
// patched mochi-mqtt fork in internal/mqttcore. Replacing the engine means
// writing another implementation of Engine, nothing in broker changes.
//
// engine imports only the standard library: it is the neutral point both
// sides import.
package engine
