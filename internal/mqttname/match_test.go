package mqttname

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"a/+/c", "a//c", true},
		{"+", "", true},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a/+", "a", false},
	} {
		if got := Match(c.filter, c.topic); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}

// matchByLevels is the rule as the specification states it, level by level:
// the fuzz target holds Match to it.
func matchByLevels(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	fs, ts := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fs {
		if f == "#" {
			return true
		}
		if i >= len(ts) || f != "+" && f != ts[i] {
			return false
		}
	}
	return len(fs) == len(ts)
}

func FuzzMatch(f *testing.F) {
	f.Add("a/+/#", "a/b/c")
	f.Add("#", "$SYS/x")
	f.Add("a/#", "a")
	f.Fuzz(func(t *testing.T, filter, topic string) {
		if CheckFilter(filter) != nil || CheckTopic(topic) != nil {
			return
		}
		if got, want := Match(filter, topic), matchByLevels(filter, topic); got != want {
			t.Fatalf("Match(%q, %q) = %v, the level-by-level rule says %v", filter, topic, got, want)
		}
	})
}
