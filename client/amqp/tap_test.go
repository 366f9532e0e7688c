package amqp

import (
	"bytes"
	"testing"
)

// TestAttachTap: the tap finds the source terminus of the broker's attach
// (role sender) among protocol headers and other frames, fed whole and
// in pieces of every size; the client's own attach (role receiver) and a
// large transfer are passed over; a source with a capabilities array
// (which codec.go does not decode) is read up to its expiry policy.
func TestAttachTap(t *testing.T) {
	attach := func(name string, role bool, src any) []byte {
		b, err := frame(frameAMQP, 0, described{descAttach, list{name, uint32(1), role, null, null, src}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	durable := described{descSource, list{"a.b", uint32(2), symbol("never")}}
	// the same source with a capabilities array (field 9): array8 of one symbol "topic"
	var e encoder
	if err := e.list(list{"c", uint32(1), symbol("never"), uint32(0), false, null, null, null, null}); err != nil {
		t.Fatal(err)
	}
	srcList := e.b
	arr := []byte{0xe0, 8, 1, codeSym8, 5, 't', 'o', 'p', 'i', 'c'}
	// rewrite the list32 header: one more element and its bytes
	srcList = append(srcList, arr...)
	size := uint32(len(srcList) - 5)
	srcList[1], srcList[2], srcList[3], srcList[4] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	srcList[8]++
	withCaps := append([]byte{codeDescribed, codeSmallUlng, descSource}, srcList...)

	var stream []byte
	stream = append(stream, protoHeader(3)...)
	stream = append(stream, protoHeader(0)...)
	stream = append(stream, attach("ours", true, durable)...) // our own attach: ignored
	stream = append(stream, attach("plain", false, described{descSource, list{"x"}})...)
	big, err := frame(frameAMQP, 0, described{descTransfer, list{uint32(1)}}, bytes.Repeat([]byte{'x'}, 100000))
	if err != nil {
		t.Fatal(err)
	}
	stream = append(stream, big...)
	stream = append(stream, attach("durable", false, durable)...)
	stream = append(stream, attach("caps", false, rawEncoded(withCaps))...)
	for _, piece := range []int{len(stream), 1, 2, 3, 7, 100, 4096} {
		tap := newAttachTap(nil)
		for i := 0; i < len(stream); i += piece {
			tap.feed(stream[i:min(i+piece, len(stream))])
		}
		if s, ok := tap.source("durable"); !ok || s.durable != 2 || s.expiry != "never" {
			t.Fatalf("pieces of %d: durable: %+v %v", piece, s, ok)
		}
		if s, ok := tap.source("plain"); !ok || s.durable != 0 || s.expiry != "" {
			t.Fatalf("pieces of %d: plain: %+v %v", piece, s, ok)
		}
		if _, ok := tap.source("ours"); ok {
			t.Fatalf("pieces of %d: our own attach taken for the broker's", piece)
		}
		if s, ok := tap.source("caps"); !ok || s.durable != 1 || s.expiry != "never" {
			t.Fatalf("pieces of %d: caps: %+v %v", piece, s, ok)
		}
	}
	if n, err := valueLen(arr, 0); err != nil || n != len(arr) {
		t.Fatalf("valueLen of an array: %d %v", n, err)
	}
}
