// Package mqttname checks MQTT topic names and topic filters against the
// rules of MQTT 3.1.1 and 5 (section 4.7): UTF-8 without U+0000, at most
// 65535 bytes, wildcards only in filters and only as whole levels. Clients
// check before they send, the broker when it receives; both use this one
// home of the rules.
package mqttname
