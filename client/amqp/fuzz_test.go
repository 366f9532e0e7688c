package amqp

// Fuzz targets for the AMQP 1.0 codec (codec.go) and the frame parsing of
// the pipelined start (pipeline.go). The broker's bytes reach decode
// through pipeConn.mayPass (every frame the broker sends while the early
// disposition is awaited, up to maxHeld bytes), so no input may panic it,
// and a declared size or element count larger than the input must be
// refused before anything is allocated for it. Seeds are the encodings of
// this package's own encoder (the first flight, the broker replies of
// TestPipeConnRead) and edge cases; crashers found so far are kept in
// testdata/fuzz.
//
//	go test ./client/amqp -run '^$' -fuzz '^FuzzDecode$' -fuzztime 60s -parallel 1

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// heapAllocated returns the bytes fn allocated on the heap (approximate:
// the runtime accounts small allocations a span at a time).
func heapAllocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// allocBound is what decoding n bytes may allocate: a fixed allowance for
// span-granular accounting plus a generous factor of the input (every
// element of a list becomes an interface value).
func allocBound(n int) uint64 { return 1<<20 + 64*uint64(n) }

// normalize is what decode(encode(v)) gives for a decoded v: the encoder
// drops the trailing nulls of every list.
func normalize(v any) any {
	switch v := v.(type) {
	case list:
		out := make(list, 0, len(v))
		for _, x := range v {
			out = append(out, normalize(x))
		}
		return trimNulls(out)
	case described:
		return described{code: v.code, value: normalize(v.value)}
	}
	return v
}

// depth is the nesting of v, counted as decodeAt counts it.
func depth(v any) int {
	switch v := v.(type) {
	case list:
		d := 0
		for _, x := range v {
			d = max(d, depth(x))
		}
		return 1 + d
	case []any:
		return depth(list(v))
	case described:
		return 1 + depth(v.value)
	}
	return 1
}

// seedValues are values the encoder writes, each a seed encoding.
func seedValues() []any {
	long := string(bytes.Repeat([]byte("x"), 300))
	return []any{
		nil, true, false, uint8(7), uint16(65535), uint32(0), uint32(200), uint32(70000),
		uint64(0), uint64(9), uint64(1 << 40), "", "topic", long, symbol("ANONYMOUS"), []byte{1, 2},
		bytes.Repeat([]byte{9}, 300), list{}, list{nil, uint32(1), nil},
		described{code: descTarget, value: list{"addr"}},
		described{code: descAccepted, value: list{}},
		described{code: descRejected, value: list{described{code: descError, value: list{symbol("amqp:not-allowed"), "no"}}}},
		described{code: descDisposition, value: list{true, uint32(0), nil, true, described{code: descAccepted, value: list{}}}},
		list{list{list{described{code: 1, value: list{symbol("s")}}}}},
	}
}

// edgeEncodings are hand-written encodings the encoder does not produce:
// the other widths, signed types, maps, and declared sizes and counts far
// beyond the input.
func edgeEncodings() [][]byte {
	return [][]byte{
		{codeList8, 3, 2, codeNull, codeTrue},                       // list8
		{codeMap8, 5, 2, codeSym8, 1, 'k', codeSmallUint, 1},        // map8 {k: 1}
		{codeMap32, 0, 0, 0, 8, 0, 0, 0, 2, codeStr8, 0, codeUint0}, // map32 {"": 0}
		{codeList8, 1, 0}, // list8, no elements
		{codeByte, 0xff}, {codeShort, 0x80, 0}, {codeInt, 0xff, 0xff, 0xff, 0xfe}, {codeSmallInt, 0x80},
		{codeLong, 1, 2, 3, 4, 5, 6, 7, 8}, {codeSmallLong, 0x7f}, {codeTimestamp, 0, 0, 0, 0, 0, 0, 0, 1},
		{codeBool, 1}, {codeUUID, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		{codeDescribed, codeSym8, 3, 'a', ':', 'b', codeList0},          // symbolic descriptor
		{codeList32, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff},                // count 2^32-1 in 4 bytes
		{codeList32, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},    // size 2^32-1
		{codeMap32, 0, 0, 0, 5, 0, 0, 0, 1, codeNull},                   // map of one element (no value)
		{codeStr32, 0xff, 0xff, 0xff, 0xff, 'a'},                        // string of 2^32-1 bytes
		{codeVbin32, 0x80, 0, 0, 0},                                     // binary of 2^31 bytes
		{codeList8, 4, 1, codeNull, codeNull, codeNull},                 // bytes after the element
		bytes.Repeat([]byte{codeDescribed}, 1000),                       // nested descriptors
		append(bytes.Repeat([]byte{codeList8, 0xff, 1}, 300), codeNull), // nested lists
		{0x60}, {0x71, 1}, {0xa1, 5, 'a'}, {0x00, 0x98}, {0xe0, 1, 0}, // truncated, unsupported
	}
}

func FuzzDecode(f *testing.F) {
	for _, v := range seedValues() {
		var e encoder
		if err := e.value(v); err != nil {
			f.Fatal(err)
		}
		f.Add(e.b)
	}
	for _, b := range edgeEncodings() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var (
			v   any
			n   int
			err error
		)
		if a := heapAllocated(func() { v, n, err = decode(b) }); a > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(b), a)
		}
		if err != nil {
			return
		}
		if n < 1 || n > len(b) {
			t.Fatalf("decode took %d of %d bytes", n, len(b))
		}
		if d := depth(v); d > maxDepth {
			t.Fatalf("decoded a value nested %d levels", d)
		}
		var e encoder
		if e.value(v) != nil {
			return // signed integers, maps, ...: the encoder writes none
		}
		w, m, err := decode(e.b)
		if err != nil || m != len(e.b) {
			t.Fatalf("re-encoded %#v: decode: %v, %d of %d bytes", v, err, m, len(e.b))
		}
		if want := normalize(v); !reflect.DeepEqual(w, want) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", w, want)
		}
	})
}

// brokerFrames are frames a broker sends during the pipelined start.
func brokerFrames() [][]byte {
	var out [][]byte
	for _, p := range []struct {
		typ     byte
		code    uint64
		fields  list
		payload []byte
	}{
		{frameSASL, 0x40, list{list{symbol("PLAIN"), symbol("ANONYMOUS")}}, nil}, // sasl-mechanisms (a list where an array belongs)
		{frameSASL, 0x44, list{uint8(0)}, nil},                                   // sasl-outcome
		{frameAMQP, descOpen, list{"broker", nil, uint32(65536), uint16(65535), uint32(30000)}, nil},
		{frameAMQP, descBegin, list{uint16(0), uint32(1), uint32(10), uint32(10), uint32(65535)}, nil},
		{frameAMQP, descAttach, list{"l", uint32(0), true, uint8(2), nil, described{code: descSource, value: list{}},
			described{code: descTarget, value: list{"a"}}, nil, nil, uint32(0)}, nil},
		{frameAMQP, descFlow, list{uint32(1), uint32(100), uint32(0), uint32(100), uint32(0), uint32(0), uint32(1000)}, nil},
		{frameAMQP, descDisposition, list{false, uint32(0)}, nil},
		{frameAMQP, descDisposition, list{true, uint32(0), nil, true, described{code: descAccepted, value: list{}}}, nil},
		{frameAMQP, descDisposition, list{true, uint32(0), nil, true, described{code: descRejected,
			value: list{described{code: descError, value: list{symbol("amqp:not-allowed"), "no"}}}}}, nil},
		{frameAMQP, descDisposition, list{true, uint32(0), nil, true, described{code: descReleased, value: list{}}}, nil},
		{frameAMQP, descDisposition, list{true, uint32(0), nil, true, described{code: descModified, value: list{}}}, nil},
		{frameAMQP, descTransfer, list{uint32(0), uint32(0), []byte("tag"), uint32(0), false, false}, []byte("message")},
		{frameAMQP, 0x18, list{described{code: descError, value: list{symbol("amqp:connection:forced")}}}, nil}, // close
	} {
		b, err := frame(p.typ, 0, described{code: p.code, value: p.fields}, p.payload)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out, protoHeader(0), protoHeader(3), []byte{0, 0, 0, 8, 2, 0, 0, 0})
}

func FuzzFrame(f *testing.F) {
	es := &earlyStart{sasl: "PLAIN", username: "u", password: "p", containerID: "c", hostname: "h",
		idleTimeout: time.Minute, linkName: "l", address: "a", tag: make([]byte, 8), payload: bytes.Repeat([]byte{7}, 700)}
	units, err := es.flight()
	if err != nil {
		f.Fatal(err)
	}
	for _, u := range units {
		f.Add(u.raw)
	}
	for _, b := range brokerFrames() {
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 9, 2, 0, 0, 0, codeDescribed})                                // truncated body
	f.Add([]byte{0, 0, 0, 12, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})                      // extended header
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0})                                   // 4 GiB frame
	f.Add([]byte{0, 0, 0, 17, 2, 0, 0, 0, 0, 0x53, 0x15, codeList32, 0, 0, 0, 4, 0xff}) // count beyond the frame
	f.Fuzz(func(t *testing.T, b []byte) {
		size, err := unitSize(b)
		if err == nil && len(b) >= 8 && (size < 8 || size > maxHeld) {
			t.Fatalf("unitSize %d", size)
		}
		if err == nil && size > 0 && len(b) >= size {
			// What pipeConn.Read does with a whole unit from the broker.
			p := newPipeConn(nil, nil)
			var pass bool
			if a := heapAllocated(func() { pass = p.mayPass(b[:size]) }); a > allocBound(size) {
				t.Fatalf("a frame of %d bytes allocated %d bytes", size, a)
			}
			_ = pass
		}
		u, err := parseUnit(b)
		if err != nil || u.header || u.fields == nil {
			return
		}
		// A performative that decodes frames again the same.
		doff := int(b[4]) * 4
		_, _, payload, err := performative(b[doff:])
		if err != nil {
			t.Fatalf("parseUnit accepted a frame whose performative does not decode: %v", err)
		}
		raw, err := frame(u.typ, u.channel, described{code: u.code, value: u.fields}, payload)
		if err != nil {
			return // fields the encoder does not write
		}
		v, err := parseUnit(raw)
		if err != nil {
			t.Fatalf("re-framed: %v", err)
		}
		if v.typ != u.typ || v.channel != u.channel || v.code != u.code || !reflect.DeepEqual(v.fields, normalize(u.fields)) {
			t.Fatalf("re-framed: %s %v, was %s %v", v.name(), v.fields, u.name(), u.fields)
		}
		if _, _, p2, _ := performative(raw[8:]); !bytes.Equal(p2, payload) {
			t.Fatalf("re-framed payload %q, was %q", p2, payload)
		}
	})
}

// TestDecodeHugeDeclarations: sizes and counts that the input cannot hold
// are refused without allocating for them.
func TestDecodeHugeDeclarations(t *testing.T) {
	for _, b := range [][]byte{
		{codeList32, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff},
		{codeMap32, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff},
		{codeList32, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{codeStr32, 0xff, 0xff, 0xff, 0xff, 'a'},
		{codeVbin32, 0x80, 0, 0, 0},
		binary.BigEndian.AppendUint32([]byte{codeSym32}, 1<<31),
	} {
		var err error
		if a := heapAllocated(func() { _, _, err = decode(b) }); a > allocBound(len(b)) || err == nil {
			t.Errorf("% x: %d bytes allocated, error %v", b, a, err)
		}
	}
}

// TestDecodeMalformed: malformed encodings are errors that say what is
// wrong, not panics or values; each was a fuzzing crasher or a finding of
// the review that wrote the targets (testdata/fuzz/FuzzDecode keeps them).
func TestDecodeMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		// On 32-bit platforms (GOARCH=arm, 386) int(count) was negative:
		// make(list, 0, -1) panicked.
		{"count 2^32-1", []byte{codeList32, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, "4294967295 elements in 0 bytes"},
		{"count beyond size", []byte{codeList8, 2, 5, codeNull}, "5 elements in 1 bytes"},
		{"size beyond input", []byte{codeList32, 0x80, 0, 0, 0, 0, 0, 0, 1, codeNull}, "truncated"},
		{"size without count", []byte{codeList8, 0, 0}, "no room for its count"},
		{"string beyond input", []byte{codeStr32, 0xff, 0xff, 0xff, 0xff, 'a'}, "4294967295 bytes in the 1 left"},
		{"odd map", []byte{codeMap8, 2, 1, codeNull}, "map of 1 elements"},
		{"bytes after the elements", []byte{codeList8, 4, 1, codeNull, codeNull, codeNull}, "ends 2 bytes before its size"},
		{"deep descriptors", bytes.Repeat([]byte{codeDescribed}, 100), "nested deeper than 64"},
	} {
		v, _, err := decode(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %#v, error %v; want %q", tc.name, v, err, tc.want)
		}
	}
	// maxDepth levels decode; one more does not.
	nest := func(levels int) []byte {
		var v any = true
		for range levels - 1 {
			v = list{v}
		}
		var e encoder
		if err := e.value(v); err != nil {
			t.Fatal(err)
		}
		return e.b
	}
	if _, _, err := decode(nest(maxDepth)); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if _, _, err := decode(nest(maxDepth + 1)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("%d levels: error %v", maxDepth+1, err)
	}
}

// TestDecodeDeepFrame: a broker frame of the largest size pipeConn holds
// (maxHeld), all nested descriptors, is refused at once. It used to
// recurse a million levels: 512 MB of goroutine stack and seconds of CPU.
func TestDecodeDeepFrame(t *testing.T) {
	b := bytes.Repeat([]byte{codeDescribed}, maxHeld)
	start := time.Now()
	if _, _, err := decode(b); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("error %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}
