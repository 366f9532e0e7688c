package transport

// Fuzz target for MQTTFirstPacket, the FirstMessageFunc that decides which
// bytes of an MQTT connection's 0-RTT flight the broker (and the gateway)
// read before the QUIC handshake completes: the only bytes of a peer this
// package parses itself.
//
//	go test ./transport -run '^$' -fuzz '^FuzzMQTTFirstPacket$' -fuzztime 60s -parallel 1

import "testing"

func FuzzMQTTFirstPacket(f *testing.F) {
	for _, b := range [][]byte{
		{0x10, 12, 0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 30, 0, 0, 0x30, 0}, // CONNECT v5, then a PUBLISH
		{0x10, 0x80, 0x01}, {0x30, 0xff, 0xff, 0xff, 0x7f}, {0x10, 0xff, 0xff, 0xff, 0xff}, {0x10}, {},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		// Read as HoldAfterFirst reads: what MQTTFirstPacket asks for.
		prefix := stream[:0]
		for {
			total, more := MQTTFirstPacket(prefix)
			switch {
			case total > 0 && more != 0, total <= 0 && more <= 0:
				t.Fatalf("prefix % x: total %d, more %d", prefix, total, more)
			case total > 0:
				// The fixed header: type byte, remaining length in 1 to 4
				// bytes of 7 bits (MQTT 5 section 1.5.5), else invalid.
				n, mult := 0, 1
				for i := 1; i <= 4 && i < len(prefix); i++ {
					n += int(prefix[i]&0x7f) * mult
					if prefix[i]&0x80 == 0 {
						if total != 1+i+n || len(prefix) != 1+i {
							t.Fatalf("prefix % x: total %d, want %d", prefix, total, 1+i+n)
						}
						return
					}
					mult *= 128
				}
				if total != len(prefix) || len(prefix) != 5 {
					t.Fatalf("invalid prefix % x: total %d", prefix, total)
				}
				return
			case len(prefix)+more > len(stream):
				return
			}
			prefix = stream[:len(prefix)+more]
		}
	})
}
