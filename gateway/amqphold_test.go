package gateway

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// amqpFrame is a frame whose body is the descriptor code and an empty
// list, then payload.
func amqpFrame(typ, code byte, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, 2, typ, 0, 0, 0x00, 0x53, code, 0x45}
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// TestAMQPBeforeTransfer: read as HoldAfterFirst reads (never more than
// asked for), the first message ends where the first transfer frame
// starts, after headers, SASL and the open/begin/attach of a pipelined
// start; a ulong descriptor is recognised too; bad framing and a start
// without a transfer end the first message.
func TestAMQPBeforeTransfer(t *testing.T) {
	hdr := func(id byte) []byte { return []byte{'A', 'M', 'Q', 'P', id, 1, 0, 0} }
	var start []byte
	for _, p := range [][]byte{hdr(3), amqpFrame(1, 0x41, []byte("anon")), hdr(0), amqpFrame(0, 0x10, nil),
		{0, 0, 0, 8, 2, 0, 0, 0}, amqpFrame(0, 0x11, nil), amqpFrame(0, 0x12, bytes.Repeat([]byte{1}, 300))} {
		start = append(start, p...)
	}
	longDesc := []byte{0, 0, 0, 0, 2, 0, 0, 0, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x45, 'm'}
	binary.BigEndian.PutUint32(longDesc, uint32(len(longDesc)))
	for name, tc := range map[string]struct {
		stream []byte
		want   int
	}{
		"pipelined start":  {append(append(append([]byte(nil), start...), amqpFrame(0, 0x14, []byte("message"))...), "more"...), len(start)},
		"ulong descriptor": {append(append([]byte(nil), start...), longDesc...), len(start)},
		"bad frame size":   {append(hdr(0), 0, 0, 0, 3, 2, 0, 0, 0, 1, 2), 16},
	} {
		prefix, total := []byte{}, 0
		for total == 0 {
			var more int
			total, more = amqpBeforeTransfer(prefix)
			if total > 0 {
				break
			}
			if more <= 0 || len(prefix)+more > len(tc.stream) {
				t.Fatalf("%s: at %d bytes asks for %d more", name, len(prefix), more)
			}
			prefix = tc.stream[:len(prefix)+more]
		}
		if total != tc.want {
			t.Errorf("%s: first message %d bytes, want %d", name, total, tc.want)
		}
	}
	// No transfer at all (a receiver): the first message ends by the scan
	// bound, so the prefix stays bounded.
	recv := append([]byte(nil), start...)
	for len(recv) < amqpHoldScan+1000 {
		recv = append(recv, amqpFrame(0, 0x13, bytes.Repeat([]byte{0}, 100))...)
	}
	if total, _ := amqpBeforeTransfer(recv); total == 0 || total > amqpHoldScan+200 {
		t.Fatalf("receiver: first message %d bytes", total)
	}
}
