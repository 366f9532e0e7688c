package mqttname

import "testing"

func TestCheck(t *testing.T) {
	long := make([]byte, MaxLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, tc := range []struct {
		s             string
		topic, filter bool // valid as
	}{
		{"a/b", true, true},
		{"a/+/b", false, true},
		{"a/#", false, true},
		{"#", false, true},
		{"+", false, true},
		{"/", true, true},
		{"a/#/b", false, false},
		{"a/b#", false, false},
		{"a+/b", false, false},
		{"", false, false},
		{"bad/\xc3\x28", false, false},
		{"nul/a\x00b", false, false},
		{string(long), false, false},
		{"$SYS/broker", true, true},
	} {
		if got := CheckTopic(tc.s) == nil; got != tc.topic {
			t.Errorf("CheckTopic(%.20q) valid=%v, want %v (%v)", tc.s, got, tc.topic, CheckTopic(tc.s))
		}
		if got := CheckFilter(tc.s) == nil; got != tc.filter {
			t.Errorf("CheckFilter(%.20q) valid=%v, want %v (%v)", tc.s, got, tc.filter, CheckFilter(tc.s))
		}
	}
}
