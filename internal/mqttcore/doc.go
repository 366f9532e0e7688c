// SPDX-License-Identifier: MIT

// Package mqttcore is iotq's MQTT 3.1.1 and 5 engine: sessions, the topic
// tree, retained messages, Wills, flow control and the hooks the broker
// plugs into (authentication, ACL, persistence, backpressure). It is a fork
// of mochi-mqtt/server v2.7.9 (MIT, LICENSE.md) that lives in this module;
// PATCHES.md lists every change from upstream and why. The broker (package
// broker) is its only user: it wraps it behind a small engine interface, so
// nothing outside broker/ depends on this package's API.
package mqttcore
