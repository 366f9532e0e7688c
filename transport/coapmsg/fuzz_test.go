package coapmsg

// Fuzz targets for what this package does with a peer's bytes: a datagram
// (Decode and the Endpoint's receive path: deduplication, ACK/RST
// matching, token routing, the critical-option check, replies), an
// RFC 8323 stream (ReadStreamMessage's framing, which it parses itself
// before handing the frame to go-coap's decoder) and StreamFirstMessage
// (the FirstMessageFunc that decides what of a 0-RTT flight is read before
// the handshake). go-coap decodes the message itself; we fuzz through it.
// Seeds are messages of this package's own encoders (Encode, EncodeStream)
// and edge cases; crashers found so far are kept in testdata/fuzz.
//
//	go test ./transport/coapmsg -run '^$' -fuzz '^FuzzReadStreamMessage$' -fuzztime 60s -parallel 1

import (
	"bufio"
	"bytes"
	"net"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// fuzzAllocated returns the bytes fn allocated on the heap (approximate:
// the runtime accounts small allocations a span at a time).
func fuzzAllocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// seedMessages are messages of every type and a few option shapes.
func seedMessages() []*message.Message {
	opt := func(id message.OptionID, v string) message.Option { return message.Option{ID: id, Value: []byte(v)} }
	get := &message.Message{Type: message.Confirmable, Code: codes.GET, MessageID: 0x1234, Token: message.Token("tok")}
	get.Options = get.Options.Add(opt(message.URIPath, "t"))
	get.Options = get.Options.Add(opt(message.URIPath, "a"))
	get.Options = get.Options.Add(opt(message.Observe, ""))
	put := &message.Message{Type: message.NonConfirmable, Code: codes.PUT, MessageID: 7, Token: message.Token{1, 2, 3, 4, 5, 6, 7, 8},
		Payload: bytes.Repeat([]byte("x"), 300)}
	put.Options = put.Options.Add(opt(message.URIPath, "ps"))
	put.Options = put.Options.Add(opt(message.ContentFormat, "\x3c"))
	put.Options = put.Options.Add(opt(message.Block1, "\x0e"))
	content := &message.Message{Type: message.Acknowledgement, Code: codes.Content, MessageID: 0x1234, Token: message.Token("tok"), Payload: []byte("v")}
	content.Options = content.Options.Add(opt(message.Observe, "\x01\x02"))
	content.Options = content.Options.Add(opt(message.Block2, "\x16"))
	content.Options = content.Options.Add(opt(message.Size2, "\x04\x00"))
	crit := &message.Message{Type: message.Confirmable, Code: codes.POST, MessageID: 9, Token: message.Token("c")}
	crit.Options = crit.Options.Add(opt(message.URIPath, "t"))
	crit.Options = crit.Options.Add(opt(2049, "unknown critical"))
	crit.Options = crit.Options.Add(opt(3000, "elective"))
	return []*message.Message{
		get, put, content, crit,
		{Type: message.Acknowledgement, Code: codes.Empty, MessageID: 0x1234},
		{Type: message.Reset, Code: codes.Empty, MessageID: 0x1234},
		{Type: message.Confirmable, Code: codes.Empty, MessageID: 3}, // ping
		{Type: message.Confirmable, Code: codes.Content, MessageID: 4, Token: message.Token("tok"), Payload: []byte("notification")},
		{Type: message.NonConfirmable, Code: codes.NotFound, MessageID: 5, Token: message.Token("other")},
		{Type: message.Confirmable, Code: codes.Code(0xe1), MessageID: 6}, // 7.01 on UDP
		{Type: message.NonConfirmable, Code: codes.DELETE, MessageID: 8, Token: message.Token("d")},
	}
}

// sameMessage compares what a decoder gives for two encodings.
func sameMessage(a, b *message.Message) bool {
	return a.Type == b.Type && a.Code == b.Code && a.MessageID == b.MessageID && bytes.Equal(a.Token, b.Token) &&
		bytes.Equal(a.Payload, b.Payload) && len(a.Options) == len(b.Options) &&
		(len(a.Options) == 0 || reflect.DeepEqual(a.Options, b.Options))
}

func FuzzDecode(f *testing.F) {
	for _, m := range seedMessages() {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, b := range [][]byte{
		{0x40, 0x01, 0, 1, 0xff},               // payload marker, no payload
		{0x49, 0x01, 0, 1},                     // token length 9
		{0x40, 0x01, 0, 1, 0xd0},               // option delta 13, no extension
		{0x40, 0x01, 0, 1, 0xe1, 0xff, 0xff},   // option delta 14: 65804
		{0x40, 0x01, 0, 1, 0x0f},               // option length nibble 15
		{0x40, 0x01, 0, 1, 0xb1, 't', 0x01, 1}, // Uri-Path then option 11+0
		{0x80, 0x01, 0, 1},                     // version 2
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := Encode(m)
		if err != nil {
			return // go-coap decodes some messages it does not encode
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded % x: %v", enc, err)
		}
		if !sameMessage(m, m2) {
			t.Fatalf("round trip:\n got %v\nwant %v", m2, m)
		}
	})
}

// checkFirstMessageFunc checks the transport.FirstMessageFunc contract on
// stream, read as HoldAfterFirst reads it: given a prefix it says the
// first message's total length or asks for more bytes, never neither, and
// it is done before the stream is exhausted or says where it ends.
func checkFirstMessageFunc(t *testing.T, first func([]byte) (int, int), stream []byte) (total int) {
	t.Helper()
	prefix := stream[:0]
	for {
		total, more := first(prefix)
		switch {
		case total > 0 && more != 0:
			t.Fatalf("prefix of %d bytes: total %d and more %d", len(prefix), total, more)
		case total > 0:
			return total
		case more <= 0:
			t.Fatalf("prefix of %d bytes: total %d, more %d: neither a length nor a request for bytes", len(prefix), total, more)
		case len(prefix)+more > len(stream):
			return 0 // the stream ends first
		}
		prefix = stream[:len(prefix)+more]
	}
}

func FuzzReadStreamMessage(f *testing.F) {
	csm := &message.Message{Code: codes.CSM}
	csm.Options = csm.Options.Add(message.Option{ID: 2, Value: []byte{0x12, 0x00, 0x00}})
	csm.Options = csm.Options.Add(message.Option{ID: 4})
	var all []byte
	for _, m := range append([]*message.Message{csm, {Code: codes.Ping, Token: message.Token("p")}, {Code: codes.Abort, Payload: []byte("bye")}}, seedMessages()...) {
		b, err := EncodeStream(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all) // several messages in a row
	for _, size := range []int{12, 13, 268, 269, 65804, 65805} {
		b, err := EncodeStream(&message.Message{Code: codes.PUT, Token: message.Token("t"), Payload: bytes.Repeat([]byte{'x'}, size)})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xf0, 0xff, 0xff, 0xff, 0xff, 0x01})       // 4 GiB declared
	f.Add([]byte{0xe0, 0xff, 0xff, 0x01})                   // 65804 bytes declared, none there
	f.Add([]byte{0x09, 0x01})                               // token length 9
	f.Add([]byte{0x10, 0x01, 0xff})                         // payload marker, no payload
	f.Add([]byte{0xd8, 0x00, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}) // 13-byte length class, token 8
	const max = DefaultMaxMessageSize * 1024                // what the broker's CoAP front allows
	f.Fuzz(func(t *testing.T, stream []byte) {
		total := checkFirstMessageFunc(t, StreamFirstMessage, stream)
		src := bytes.NewReader(stream)
		r := bufio.NewReader(src)
		var (
			m   *message.Message
			err error
		)
		if a := fuzzAllocated(func() { m, err = ReadStreamMessage(r, max) }); a > 1<<20+4*uint64(len(stream)) {
			t.Fatalf("reading %d bytes allocated %d bytes", len(stream), a)
		}
		if err != nil {
			return
		}
		// The 0-RTT hold and the reader agree where the first message ends.
		if read := len(stream) - src.Len() - r.Buffered(); total != read {
			t.Fatalf("StreamFirstMessage says %d bytes, ReadStreamMessage read %d", total, read)
		}
		enc, err := EncodeStream(m)
		if err != nil {
			return
		}
		m2, err := ReadStreamMessage(bufio.NewReader(bytes.NewReader(enc)), max)
		if err != nil {
			t.Fatalf("re-encoded % x: %v", enc, err)
		}
		if m2.Code != m.Code || !bytes.Equal(m2.Token, m.Token) || !bytes.Equal(m2.Payload, m.Payload) ||
			len(m2.Options) != len(m.Options) || (len(m.Options) > 0 && !reflect.DeepEqual(m2.Options, m.Options)) {
			t.Fatalf("round trip:\n got %v\nwant %v", m2, m)
		}
	})
}

var fuzzPeer = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5683}

// FuzzEndpointReceive feeds two datagrams from one peer (and the first
// again: a duplicate) to an endpoint that serves requests (echoing the
// request's options and payload), has a CON message outstanding to the
// peer (message ID 0x1234, token "tok") and routes token "tok". Nothing
// may panic and every datagram the endpoint writes must decode.
func FuzzEndpointReceive(f *testing.F) {
	var enc [][]byte
	for _, m := range seedMessages() {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		enc = append(enc, b)
	}
	for i := range enc {
		f.Add(enc[i], enc[(i+1)%len(enc)])
	}
	f.Add([]byte{0x40, 0x01, 0x12, 0x34, 0xff}, []byte{0x50}) // a malformed CON (answered with RST), a runt
	f.Fuzz(func(t *testing.T, a, b []byte) {
		clk := newFakeClock()
		conn := newFakeConn(clk)
		e, err := New(conn, Options{Clock: clk, Rand: func() float64 { return 0.5 }, PeerQueue: 1,
			Handler: func(_ net.Addr, req *message.Message) *message.Message {
				return &message.Message{Code: codes.Content, Options: append(message.Options(nil), req.Options...), Payload: req.Payload}
			}})
		if err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		e.mid = 0x1233
		e.mu.Unlock()
		acked := 0
		if err := e.Send(fuzzPeer, &message.Message{Type: message.Confirmable, Code: codes.GET, Token: message.Token("tok")},
			func(*message.Message, error) { acked++ }); err != nil {
			t.Fatal(err)
		}
		cancel := e.HandleToken(fuzzPeer, message.Token("tok"), func(*message.Message) {})
		for _, d := range [][]byte{a, b, a} {
			e.receive(fuzzPeer, d)
		}
		clk.Advance(5 * time.Minute) // retransmissions, time-out, sweeps
		cancel()
		_ = e.Close()
		if acked != 1 {
			t.Fatalf("the outstanding CON message completed %d times", acked)
		}
		for _, s := range conn.sent() {
			if _, err := Decode(s.data); err != nil {
				t.Fatalf("the endpoint wrote a datagram that does not decode: % x: %v", s.data, err)
			}
		}
	})
}

// TestStreamHugeLength: an RFC 8323 length of 65805 + 2^31 or more is
// refused before anything is allocated, and StreamFirstMessage gives a
// positive total for it. On 32-bit platforms the length overflowed an int:
// ReadStreamMessage panicked (makeslice with a negative length) and
// StreamFirstMessage returned a negative total (testdata/fuzz keeps it).
func TestStreamHugeLength(t *testing.T) {
	for _, ext := range [][]byte{{0x80, 0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, {0x7f, 0xff, 0xfe, 0xf0}} {
		b := append(append([]byte{0xf8}, ext...), 0x01, 1, 2, 3, 4, 5, 6, 7, 8)
		if total, more := StreamFirstMessage(b); total <= 0 || more != 0 {
			t.Errorf("% x: total %d, more %d", ext, total, more)
		}
		_, err := ReadStreamMessage(bufio.NewReader(bytes.NewReader(b)), DefaultMaxMessageSize*1024)
		if err == nil || !strings.Contains(err.Error(), "exceeds the maximum") {
			t.Errorf("% x: %v", ext, err)
		}
	}
}
