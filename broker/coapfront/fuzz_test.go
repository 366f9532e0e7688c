package coapfront

// Fuzz targets for what the CoAP front parses of a client's bytes: the
// CBOR of topic properties (decodeCBORMap: POST /ps, FETCH /ps, POST and
// iPATCH /ps/<id>), the CBOR array of a FETCH on a configuration
// (decodeCBORKeys), both decoded by github.com/fxamacker/cbor/v2 with the
// front's DecOptions (MaxMapPairs, MaxArrayElements, MaxNestedLevels bound
// what a payload can make it allocate; duplicate keys, NaN and infinities
// refused), and whole RFC 8323 sessions through ServeStream:
// framing, CSM/Ping/Release, paths, queries, Content-Format, Observe,
// Block1 and Block2 options, with a pub-sub topic in place so that the
// configuration and topic-data resources are reachable. Seeds are this
// package's own encodings (encodeCBORMap, coapmsg.EncodeStream) and edge
// cases; crashers found so far are kept in testdata/fuzz.
//
//	go test ./broker/coapfront -run '^$' -fuzz '^FuzzServeStream$' -fuzztime 60s -parallel 1

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapmsg"
)

// The property codec under test, named in one place: the rest of this
// file uses the front only through New, ServeStream and Close.
var (
	fuzzEncodeProps = encodeCBORMap
	fuzzDecodeProps = decodeCBORMap
	fuzzDecodeKeys  = decodeCBORKeys
)

// cborArray encodes keys as a CBOR array of unsigned integers (RFC 8949
// preferred serialization), independently of the codec under test.
func cborArray(keys []uint64) []byte {
	head := func(b []byte, major byte, v uint64) []byte {
		switch {
		case v < 24:
			return append(b, major<<5|byte(v))
		case v <= 0xff:
			return append(b, major<<5|24, byte(v))
		case v <= 0xffff:
			return binary.BigEndian.AppendUint16(append(b, major<<5|25), uint16(v))
		case v <= 0xffffffff:
			return binary.BigEndian.AppendUint32(append(b, major<<5|26), uint32(v))
		}
		return binary.BigEndian.AppendUint64(append(b, major<<5|27), v)
	}
	b := head(nil, 4, uint64(len(keys)))
	for _, k := range keys {
		b = head(b, 0, k)
	}
	return b
}

// seedProps are topic property maps as clients send them.
func seedProps() []map[uint64]cborValue {
	return []map[uint64]cborValue{
		{},
		{propName: {kind: 3, s: "a/b"}, propResourceType: {kind: 3, s: "core.ps.data"}},
		{propName: {kind: 3, s: "a/b"}, propResourceType: {kind: 3, s: "core.ps.data"}, propContentFmt: {kind: 0, u: 112},
			propTopicType: {kind: 3, s: "temperature"}, propExpiration: {kind: 6, u: 4102444800}, propMaxSubs: {kind: 0, u: 2},
			propObsCheck: {kind: 0, u: 30}, propInitialize: {kind: 2, s: "\x00\x01"}},
		{propExpiration: {kind: 6, u: 1}},
		{propExpiration: {kind: 6, num: 7, f: 4102444800.5}, propObsCheck: {kind: 0, u: 0}},
		{propExpiration: {kind: 6, num: 1, i: -1}},
		{300: {kind: 0, u: 1 << 40}, 1 << 33: {kind: 0, u: 1<<64 - 1}, 23: {kind: 0, u: 24}, 255: {kind: 0, u: 256}, 65535: {kind: 0, u: 65536}},
	}
}

func FuzzDecodeCBORMap(f *testing.F) {
	for _, p := range seedProps() {
		f.Add(fuzzEncodeProps(p))
	}
	for _, b := range [][]byte{
		{0xa1, 0x00, 0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00},                   // {0: 1(1700000000)}
		{0xa1, 0x00, 0xc2, 0x00},                                           // tag 2
		{0xa1, 0x00, 0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // text of 2^64-1 bytes
		{0xbf, 0xff}, // indefinite map
		{0xb8, 0x41}, // 65 pairs
		{0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // 2^64-1 pairs
		{0xa2, 0x00, 0x00, 0x00, 0x01},                         // duplicate key
		{0xa1, 0x20, 0x00},                                     // negative key
		{0xa1, 0x00, 0x00, 0x00},                               // trailing byte
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := fuzzDecodeProps(b)
		if err != nil {
			return
		}
		if len(m) > 64 || len(m) > len(b) {
			t.Fatalf("%d properties decoded from %d bytes", len(m), len(b))
		}
		enc := fuzzEncodeProps(m)
		m2, err := fuzzDecodeProps(enc)
		if err != nil {
			t.Fatalf("re-encoded % x: %v", enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip:\n got %v\nwant %v", m2, m)
		}
		// The encoding is deterministic: encoding again gives the same bytes.
		if again := fuzzEncodeProps(m2); !bytes.Equal(again, enc) {
			t.Fatalf("encodings differ: % x, % x", again, enc)
		}
	})
}

func FuzzDecodeCBORKeys(f *testing.F) {
	f.Add(cborArray(nil))
	f.Add(cborArray([]uint64{0, 5, 42}))
	f.Add(cborArray([]uint64{1<<64 - 1}))
	f.Add([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // 2^64-1 elements
	f.Add([]byte{0x9f, 0x00, 0xff})                                     // indefinite array
	f.Add([]byte{0x82, 0x00, 0x61, 0x61})                               // a text element
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := fuzzDecodeKeys(b)
		if err != nil {
			return
		}
		if len(keys) > cborMaxElements || len(keys) > len(b) {
			t.Fatalf("%d keys from %d bytes", len(keys), len(b))
		}
		got, err := fuzzDecodeKeys(cborArray(keys))
		if err != nil || len(got) != len(keys) || (len(keys) > 0 && !reflect.DeepEqual(got, keys)) {
			t.Fatalf("round trip: %v, %v; want %v", got, err, keys)
		}
	})
}

// fuzzConn is a stream connection that reads in and records what is
// written; closed is closed when the front closes it (its session ended).
type fuzzConn struct {
	in     io.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	once   sync.Once
	closed chan struct{}
}

func newFuzzConn(in []byte) *fuzzConn {
	return &fuzzConn{in: bytes.NewReader(in), closed: make(chan struct{})}
}

func (c *fuzzConn) Read(b []byte) (int, error) { return c.in.Read(b) }
func (c *fuzzConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(b)
}
func (c *fuzzConn) Close() error        { c.once.Do(func() { close(c.closed) }); return nil }
func (c *fuzzConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5683} }
func (c *fuzzConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}
}
func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// session serves in as one stream session on fr and returns the messages
// the front wrote, once the session ended.
func session(t *testing.T, fr *Front, in []byte) []*message.Message {
	t.Helper()
	c := newFuzzConn(in)
	fr.ServeStream(c)
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end with its input")
	}
	c.mu.Lock()
	out := append([]byte(nil), c.out.Bytes()...)
	c.mu.Unlock()
	var msgs []*message.Message
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		if _, err := r.Peek(1); err == io.EOF {
			return msgs
		}
		m, err := coapmsg.ReadStreamMessage(r, coapmsg.DefaultMaxMessageSize*1024)
		if err != nil {
			t.Fatalf("message %d the front wrote: %v", len(msgs), err)
		}
		msgs = append(msgs, m)
	}
}

// The pub-sub topic every fuzzed session finds in place: fuzzTopicID in
// a session's bytes stands for its id (8 hex digits, like the placeholder,
// so the framing stays valid).
const (
	fuzzTopicID   = "0a0b0c0d"
	fuzzTopicName = "pre/t"
)

// streamOf encodes msgs as one RFC 8323 byte stream.
func streamOf(tb testing.TB, msgs ...*message.Message) []byte {
	var out []byte
	for _, m := range msgs {
		b, err := coapmsg.EncodeStream(m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// seedSessions are client sessions over every resource and method.
func seedSessions(tb testing.TB) [][]byte {
	csm := &message.Message{Code: codes.CSM}
	sreq := func(code codes.Code, path string, payload []byte, opts ...message.Option) *message.Message {
		m := req(code, path, opts...)
		m.Type, m.MessageID, m.Token, m.Payload = 0, 0, message.Token("tk"), payload
		return m
	}
	cf := uintOpt(message.ContentFormat, DefaultContentFormat)
	conf, data := "ps/"+fuzzTopicID, "ps/data/"+fuzzTopicID
	create := fuzzEncodeProps(seedProps()[2])
	keys := []byte{0x83, 0x00, 0x02, 0x05}
	long := bytes.Repeat([]byte("v"), 100)
	return [][]byte{
		streamOf(tb, csm, sreq(codes.GET, ".well-known/core", nil, message.Option{ID: message.URIQuery, Value: []byte("rt=core.ps*")}),
			&message.Message{Code: codes.Ping, Token: message.Token("p")}, &message.Message{Code: codes.Release}),
		streamOf(tb, csm, sreq(codes.POST, "ps", create, cf), sreq(codes.GET, "ps", nil, message.Option{ID: message.URIQuery, Value: []byte("rt=core.ps.data")}),
			sreq(codeFETCH, "ps", fuzzEncodeProps(seedProps()[1]), cf)),
		streamOf(tb, csm, sreq(codes.GET, conf, nil), sreq(codeFETCH, conf, keys, uintOpt(message.ContentFormat, contentFormatCBOR)),
			sreq(codeIPATCH, conf, fuzzEncodeProps(map[uint64]cborValue{propMaxSubs: {kind: 0, u: 1}}), cf),
			sreq(codes.POST, conf, fuzzEncodeProps(map[uint64]cborValue{propName: {kind: 3, s: fuzzTopicName}}), cf),
			sreq(codes.DELETE, conf, nil)),
		streamOf(tb, csm, sreq(codes.GET, data, nil, uintOpt(message.Observe, 0)), sreq(codes.PUT, data, []byte("1"), cf),
			sreq(codes.GET, data, nil, uintOpt(message.Observe, 1)), sreq(codes.DELETE, data, nil)),
		streamOf(tb, csm, sreq(codes.PUT, "t/a/b", long[:32], uintOpt(message.Block1, 0<<4|8|1)),
			sreq(codes.PUT, "t/a/b", long[:10], uintOpt(message.Block1, 1<<4|1 /* NUM 1, M 0, SZX 1 */)),
			sreq(codes.GET, "t/a/b", nil, uintOpt(message.Block2, 1<<4 /* NUM 1, M 0, SZX 0 */)),
			sreq(codes.GET, "t/a/b", nil, uintOpt(message.Observe, 0), uintOpt(message.Block2, 0|1)),
			sreq(codes.PUT, "t/a/b", long, uintOpt(message.Block1, 7))),
		streamOf(tb, sreq(codes.GET, "t/x", nil)), // no CSM first
		streamOf(tb, csm, sreq(codes.GET, "t/x", nil, message.Option{ID: 2049, Value: []byte("crit")}), &message.Message{Code: codes.Abort}),
	}
}

// FuzzServeStream runs one RFC 8323 session with the fuzzed input as
// everything the client sends, on a front where a setup session created a
// pub-sub topic (with max-subscribers 1) that has a value. Nothing may
// panic, the session must end when the input does, and everything the
// front writes must be a valid stream of messages.
func FuzzServeStream(f *testing.F) {
	for _, s := range seedSessions(f) {
		f.Add(s)
	}
	create := &message.Message{Code: codes.POST, Token: message.Token("c"), Payload: fuzzEncodeProps(map[uint64]cborValue{
		propName: {kind: 3, s: fuzzTopicName}, propResourceType: {kind: 3, s: "core.ps.data"}, propMaxSubs: {kind: 0, u: 1}})}
	create.Options = create.Options.Add(message.Option{ID: message.URIPath, Value: []byte("ps")})
	create.Options = create.Options.Add(uintOpt(message.ContentFormat, DefaultContentFormat))
	setup := streamOf(f, &message.Message{Code: codes.CSM}, create)
	f.Fuzz(func(t *testing.T, stream []byte) {
		topics := &memTopics{}
		fr, err := New(topics, Options{BlockSize: 16, MaxPayload: 256, MaxTopics: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fr.Close() }()
		var id string
		for _, m := range session(t, fr, setup) {
			if m.Code == codes.Created {
				loc, _ := m.Options.LocationPath()
				id = loc[strings.LastIndex(loc, "/")+1:]
			}
		}
		if len(id) != len(fuzzTopicID) {
			t.Fatalf("setup: topic id %q", id)
		}
		if err := topics.Publish(fuzzTopicName, []byte("value of the pre-made topic, longer than one block"), 1, true); err != nil {
			t.Fatal(err)
		}
		session(t, fr, bytes.ReplaceAll(stream, []byte(fuzzTopicID), []byte(id)))
	})
}
