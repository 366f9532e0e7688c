package mqttname

import "strings"

// Match reports whether topic matches the MQTT filter: '+' matches one
// level, '#' the rest (and the parent level: "a/#" matches "a"
// [MQTT-4.7.1-2]); a wildcard at the first level does not match a topic
// starting with '$' [MQTT-4.7.2-1]. filter is taken as written: a shared
// subscription's "$share/GROUP/" prefix is the caller's to strip. Match does
// not allocate: the broker calls it per message and subscription.
func Match(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		fl, frest, fmore := strings.Cut(filter, "/")
		tl, trest, tmore := strings.Cut(topic, "/")
		switch fl {
		case "#":
			return true
		case "+", tl:
		default:
			return false
		}
		if !fmore && !tmore {
			return true
		}
		if !tmore {
			return fmore && frest == "#"
		}
		if !fmore {
			return false
		}
		filter, topic = frest, trest
	}
}
