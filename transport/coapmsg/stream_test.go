package coapmsg

import (
	"bytes"
	"testing"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// TestStreamFirstMessage: for RFC 8323 frames of every length class the
// first-message length equals the encoded frame, and a shorter prefix asks
// for more bytes until the header is complete.
func TestStreamFirstMessage(t *testing.T) {
	for _, size := range []int{0, 5, 12, 13, 200, 268, 269, 5000, 65804, 65805, 70000} {
		m := &message.Message{Code: codes.PUT, Token: message.Token("tok"), Payload: bytes.Repeat([]byte{'x'}, size)}
		m.Options = m.Options.Add(message.Option{ID: message.URIPath, Value: []byte("t")})
		b, err := EncodeStream(m)
		if err != nil {
			t.Fatal(err)
		}
		stream := append(append([]byte(nil), b...), 0x01, 0x02) // the next message's bytes follow
		if total, more := StreamFirstMessage(stream); total != len(b) || more != 0 {
			t.Fatalf("payload %d: total %d more %d, want %d", size, total, more, len(b))
		}
		for n := 0; n < len(b); n++ {
			total, more := StreamFirstMessage(b[:n])
			if total == 0 && (more <= 0 || n+more > len(b)) {
				t.Fatalf("payload %d, prefix %d: asks for %d more", size, n, more)
			}
			if total != 0 && total != len(b) {
				t.Fatalf("payload %d, prefix %d: total %d, want %d", size, n, total, len(b))
			}
		}
	}
	if total, _ := StreamFirstMessage([]byte{0x0f, 1, 2}); total != 3 {
		t.Fatalf("token length 15: total %d, want the prefix (3)", total)
	}
}
