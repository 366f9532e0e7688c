package transport

import "testing"

func TestMQTTFirstPacket(t *testing.T) {
	for _, tc := range []struct {
		prefix      []byte
		total, more int
	}{
		{nil, 0, 2},
		{[]byte{0x10}, 0, 1},
		{[]byte{0x10, 0}, 2, 0},                // empty body
		{[]byte{0x10, 12}, 14, 0},              // one-byte length
		{[]byte{0x10, 0x80}, 0, 1},             // length continues
		{[]byte{0x10, 0x80, 0x01}, 3 + 128, 0}, // two bytes: 128
		{[]byte{0x30, 0xff, 0xff, 0xff, 0x7f}, 5 + 268435455, 0}, // the maximum
		{[]byte{0x10, 0xff, 0xff, 0xff}, 0, 1},
		{[]byte{0x10, 0xff, 0xff, 0xff, 0xff}, 5, 0}, // invalid: a fifth length byte
	} {
		total, more := MQTTFirstPacket(tc.prefix)
		if total != tc.total || more != tc.more {
			t.Errorf("MQTTFirstPacket(% x) = %d, %d; want %d, %d", tc.prefix, total, more, tc.total, tc.more)
		}
	}
}
