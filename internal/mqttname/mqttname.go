package mqttname

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest topic name or filter MQTT can encode (a 2-byte
// length prefix).
const MaxLen = 65535

// CheckTopic reports why name cannot be a PUBLISH topic name, or nil.
func CheckTopic(name string) error {
	if err := checkString(name); err != nil {
		return err
	}
	if i := strings.IndexAny(name, "+#"); i >= 0 {
		return fmt.Errorf("topic %q contains the wildcard %q: wildcards belong in subscription filters, not in a topic to publish to", name, name[i])
	}
	return nil
}

// CheckFilter reports why filter cannot be a SUBSCRIBE topic filter, or nil.
func CheckFilter(filter string) error {
	if err := checkString(filter); err != nil {
		return err
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("filter %q: '#' must be a whole level and the last one (e.g. a/#)", filter)
		}
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("filter %q: '+' must be a whole level (e.g. a/+/b)", filter)
		}
	}
	return nil
}

func checkString(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty topic: MQTT needs at least one character")
	case len(s) > MaxLen:
		return fmt.Errorf("topic of %d bytes: MQTT allows at most %d", len(s), MaxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("topic %q is not valid UTF-8 (MQTT section 1.5.4)", s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("topic %q contains U+0000, which MQTT forbids", s)
	}
	return nil
}
