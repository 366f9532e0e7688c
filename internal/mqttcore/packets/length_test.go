// SPDX-License-Identifier: MIT

package packets

import (
	"bytes"
	"testing"
)

// decodeLengthBytes must give DecodeLength's results on every input,
// valid or not: Properties.Decode switched from one to the other.
// [iotq patch 43]
func FuzzDecodeLengthBytes(f *testing.F) {
	for _, n := range []int64{0, 1, 127, 128, 16383, 16384, 2097151, 2097152, 268435455} {
		var b bytes.Buffer
		encodeLength(&b, n)
		f.Add(b.Bytes())
		f.Add(b.Bytes()[:b.Len()-1]) // cut short
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x7f}) // past the largest value
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, in []byte) {
		wantN, wantBU, wantErr := DecodeLength(bytes.NewBuffer(in))
		n, bu, err := decodeLengthBytes(in)
		if n != wantN || bu != wantBU || err != wantErr {
			t.Fatalf("% x: decodeLengthBytes = %d, %d, %v; DecodeLength = %d, %d, %v", in, n, bu, err, wantN, wantBU, wantErr)
		}
	})
}

// Decoding a PUBLISH's properties must not allocate the buffer its
// caller wraps the bytes in. Allocation counts, not time: the test does
// not depend on the host's speed.
func TestPropertiesDecodeKeepsBufferOnStack(t *testing.T) {
	body := []byte{0x00, 0x01, 'a', 0x00, 'p'} // topic "a", no properties, payload "p"
	var pk Packet
	pk.FixedHeader.Type = Publish
	pk.ProtocolVersion = 5
	allocs := testing.AllocsPerRun(100, func() {
		pk.Properties = Properties{}
		if err := pk.PublishDecode(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("PublishDecode of a v5 PUBLISH without properties allocated %.0f times, want 0", allocs)
	}
}
