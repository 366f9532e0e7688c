package coapfront

// Tests of the draft-ietf-core-coap-pubsub-21 details an independent client
// checked: Content-Format of topic data, observer-check > 0, initialize
// needing topic-content-format, lowering max-subscribers, fractional
// expiration dates, the rt attribute of the collection, half-created
// topics in discovery and client-chosen topic-data paths.

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// notifications registers a handler for token's notifications.
func notifications(t *testing.T, c *rawClient, token message.Token) <-chan *message.Message {
	t.Helper()
	ch := make(chan *message.Message, 16)
	cancel := c.ep.HandleToken(c.peer, token, func(m *message.Message) { ch <- m })
	t.Cleanup(cancel)
	return ch
}

// next returns the next message on ch (fails after 10 s).
func next(t *testing.T, ch <-chan *message.Message, what string) *message.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
	}
	return nil
}

func contentFormat(m *message.Message) (uint32, bool) {
	v, err := m.Options.GetUint32(message.ContentFormat)
	return v, err == nil
}

func publishTo(t *testing.T, c *rawClient, path, payload string, opts ...message.Option) *message.Message {
	t.Helper()
	put := req(codes.PUT, path, opts...)
	put.Payload = []byte(payload)
	return c.do(put)
}

// TestTopicDataContentFormat: GET responses, the Observe registration
// response and notifications of a topic's data carry its
// topic-content-format (draft section 2.2.1, examples of 3.2.2-3.2.3).
func TestTopicDataContentFormat(t *testing.T) {
	topics := &memTopics{}
	_, c := startFront(t, topics)
	_, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "cf/senml"}, 2: {kind: 3, s: "core.ps.data"}, 3: {kind: 0, u: 112}})
	if r := publishTo(t, c, data, "\x81\xa1\x02\x18\x15", uintOpt(message.ContentFormat, 112)); r.Code != codes.Created {
		t.Fatalf("PUT: %v %s", r.Code, r.Payload)
	}
	r := c.do(req(codes.GET, data))
	if cf, ok := contentFormat(r); r.Code != codes.Content || !ok || cf != 112 {
		t.Fatalf("GET: %v, Content-Format %d (present %v), want 2.05 with 112", r.Code, cf, ok)
	}
	obs := req(codes.GET, data, uintOpt(message.Observe, 0))
	notes := notifications(t, c, obs.Token)
	r = c.do(obs)
	if cf, ok := contentFormat(r); r.Code != codes.Content || !ok || cf != 112 || !r.Options.HasOption(message.Observe) {
		t.Fatalf("registration: %v, Content-Format %d (present %v), want 2.05 with 112 and Observe", r.Code, cf, ok)
	}
	next(t, notes, "registration response")
	_ = topics.Publish("cf/senml", []byte("\x80"), 1, false) // e.g. from MQTT
	n := next(t, notes, "notification")
	if cf, ok := contentFormat(n); n.Code != codes.Content || !ok || cf != 112 || string(n.Payload) != "\x80" {
		t.Fatalf("notification: %v %q, Content-Format %d (present %v), want 112", n.Code, n.Payload, cf, ok)
	}
}

// TestObserverCheckMustBePositive: observer-check 0 is refused with 4.00,
// at creation and in an update (draft section 2.2.1: "greater than 0").
func TestObserverCheckMustBePositive(t *testing.T) {
	_, c := startFront(t, &memTopics{})
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "oc/t"}, 2: {kind: 3, s: "core.ps.data"}, 7: {kind: 0, u: 0}})
	if r := c.do(create); r.Code != codes.BadRequest || len(r.Payload) == 0 {
		t.Fatalf("create with observer-check 0: %v %q, want 4.00 with a diagnostic", r.Code, r.Payload)
	}
	conf, _ := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "oc/t"}, 2: {kind: 3, s: "core.ps.data"}, 7: {kind: 0, u: 30}})
	patch := req(codeIPATCH, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	patch.Payload = encodeCBORMap(map[uint64]cborValue{7: {kind: 0, u: 0}})
	if r := c.do(patch); r.Code != codes.BadRequest {
		t.Fatalf("iPATCH observer-check 0: %v, want 4.00", r.Code)
	}
	r := c.do(req(codes.GET, conf))
	if got, err := decodeCBORMap(r.Payload); err != nil || got[7].u != 30 {
		t.Fatalf("observer-check after the refused update: %v %v, want 30", got, err)
	}
}

// TestInitializeNeedsContentFormat: initialize without topic-content-format
// is refused with 4.00 (draft section 2.2.1), at creation and when an
// update would leave the configuration so; with both, the topic is fully
// created at once and its data has that Content-Format.
func TestInitializeNeedsContentFormat(t *testing.T) {
	_, c := startFront(t, &memTopics{})
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "init/t"}, 2: {kind: 3, s: "core.ps.data"}, 8: {kind: 2, s: "\x80"}})
	if r := c.do(create); r.Code != codes.BadRequest || !strings.Contains(string(r.Payload), "topic-content-format") {
		t.Fatalf("initialize without topic-content-format: %v %q, want 4.00 naming topic-content-format", r.Code, r.Payload)
	}
	conf, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "init/t"}, 2: {kind: 3, s: "core.ps.data"},
		3: {kind: 0, u: 60}, 8: {kind: 2, s: "\x80"}})
	r := c.do(req(codes.GET, data))
	if cf, _ := contentFormat(r); r.Code != codes.Content || string(r.Payload) != "\x80" || cf != 60 {
		t.Fatalf("GET after initialize: %v %q cf %d", r.Code, r.Payload, cf)
	}
	// POST replaces: dropping topic-content-format while keeping initialize.
	post := req(codes.POST, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	post.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "init/t"}, 8: {kind: 2, s: "\x80"}})
	if r := c.do(post); r.Code != codes.BadRequest {
		t.Fatalf("POST with initialize, without topic-content-format: %v, want 4.00", r.Code)
	}
	// iPATCH adding initialize to a topic without topic-content-format.
	conf2, _ := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "init/u"}, 2: {kind: 3, s: "core.ps.data"}})
	patch := req(codeIPATCH, conf2, uintOpt(message.ContentFormat, DefaultContentFormat))
	patch.Payload = encodeCBORMap(map[uint64]cborValue{8: {kind: 2, s: "x"}})
	if r := c.do(patch); r.Code != codes.BadRequest {
		t.Fatalf("iPATCH initialize without topic-content-format: %v, want 4.00", r.Code)
	}
}

// TestLowerMaxSubscribers: lowering max-subscribers below the number of
// observers removes the newest of them, each with a final 4.04 (draft
// section 3.2.3); the remaining one still gets notifications.
func TestLowerMaxSubscribers(t *testing.T) {
	topics := &memTopics{}
	f, c := startFront(t, topics)
	conf, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "lower/t"}, 2: {kind: 3, s: "core.ps.data"}, 6: {kind: 0, u: 5}})
	if r := publishTo(t, c, data, "v0"); r.Code != codes.Created {
		t.Fatalf("PUT: %v", r.Code)
	}
	var chans []<-chan *message.Message
	for i := 0; i < 3; i++ {
		obs := req(codes.GET, data, uintOpt(message.Observe, 0))
		ch := notifications(t, c, obs.Token)
		if r := c.do(obs); !r.Options.HasOption(message.Observe) {
			t.Fatalf("observer %d not registered: %v", i, r.Code)
		}
		next(t, ch, "registration response")
		chans = append(chans, ch)
	}
	patch := req(codeIPATCH, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	patch.Payload = encodeCBORMap(map[uint64]cborValue{6: {kind: 0, u: 1}})
	if r := c.do(patch); r.Code != codes.Changed {
		t.Fatalf("iPATCH max-subscribers 1: %v %s", r.Code, r.Payload)
	}
	for i := 1; i < 3; i++ {
		if n := next(t, chans[i], "final 4.04"); n.Code != codes.NotFound || n.Options.HasOption(message.Observe) {
			t.Fatalf("observer %d (newer): %v, want a final 4.04 without Observe", i, n.Code)
		}
	}
	if s := f.Stats(); s.Observers != 1 {
		t.Fatalf("%d observers after lowering max-subscribers to 1, want 1", s.Observers)
	}
	_ = topics.Publish("lower/t", []byte("v1"), 1, false)
	if n := next(t, chans[0], "notification to the oldest observer"); n.Code != codes.Content || string(n.Payload) != "v1" {
		t.Fatalf("oldest observer: %v %q", n.Code, n.Payload)
	}
	for i := 1; i < 3; i++ {
		select {
		case n := <-chans[i]:
			t.Fatalf("removed observer %d got %v %q", i, n.Code, n.Payload)
		default:
		}
	}
}

// epochMap encodes {0: name, 2: "core.ps.data", 5: 1(x)} with x a float64
// (CBOR major type 7, 0xfb), as a client would send it.
func epochMap(name string, x float64) []byte {
	b := []byte{0xa3, 0x00, 0x60 | byte(len(name))}
	b = append(b, name...)
	b = append(b, 0x02, 0x6c)
	b = append(b, "core.ps.data"...)
	b = append(b, 0x05, 0xc1, 0xfb)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
}

// TestFractionalExpirationDate: expiration-date is #6.1(number): tag 1
// around a float is accepted (and honoured: the topic is deleted at that
// instant); a fractional date in the past is refused with 4.00.
func TestFractionalExpirationDate(t *testing.T) {
	f, c := startFront(t, &memTopics{})
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = epochMap("frac/old", float64(time.Now().Unix())-10.5)
	if r := c.do(create); r.Code != codes.BadRequest {
		t.Fatalf("fractional date in the past: %v %s, want 4.00", r.Code, r.Payload)
	}
	at := float64(time.Now().UnixMilli())/1000 + 1.25
	create = req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = epochMap("frac/t", at)
	r := c.do(create)
	if r.Code != codes.Created {
		t.Fatalf("fractional expiration-date: %v %s, want 2.01", r.Code, r.Payload)
	}
	loc, _ := r.Options.LocationPath()
	conf := strings.TrimPrefix(loc, "/")
	deadline := time.Now().Add(10 * time.Second)
	for c.do(req(codes.GET, conf)).Code != codes.NotFound {
		if time.Now().After(deadline) {
			t.Fatal("the topic did not expire within 10s of its expiration-date")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if now := float64(time.Now().UnixMilli()) / 1000; now < at {
		t.Fatalf("expired at %.3f, before its expiration-date %.3f", now, at)
	}
	if f.Stats().Expired != 1 {
		t.Fatalf("expired %d, want 1", f.Stats().Expired)
	}
}

// TestDiscoveryRTOneAttribute: the topic collection's two resource types
// are one rt attribute with space-separated values (RFC 6690 section 3.1),
// and each filter finds it.
func TestDiscoveryRTOneAttribute(t *testing.T) {
	_, c := startFront(t, &memTopics{})
	for _, q := range []string{"", "rt=core.ps", "rt=core.ps.coll"} {
		m := req(codes.GET, ".well-known/core")
		if q != "" {
			m.Options = m.Options.Add(message.Option{ID: message.URIQuery, Value: []byte(q)})
		}
		r := c.do(m)
		p := string(r.Payload)
		if r.Code != codes.Content || !strings.Contains(p, `</ps>;rt="core.ps core.ps.coll"`) || strings.Count(p, "rt=") != 1 {
			t.Fatalf("discovery %q: %v %q, want </ps>;rt=\"core.ps core.ps.coll\" once", q, r.Code, p)
		}
	}
}

// TestDiscoveryHidesHalfCreated: a topic-data resource is not listed (by
// /.well-known/core nor by /ps?rt=core.ps.data) before its first
// publication, nor after its data is deleted (draft section 3.1).
func TestDiscoveryHidesHalfCreated(t *testing.T) {
	_, c := startFront(t, &memTopics{})
	conf, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "half/t"}, 2: {kind: 3, s: "core.ps.data"}})
	listed := func() (wellKnown, coll string) {
		t.Helper()
		all := c.do(req(codes.GET, ".well-known/core"))
		m := req(codes.GET, "ps")
		m.Options = m.Options.Add(message.Option{ID: message.URIQuery, Value: []byte("rt=core.ps.data")})
		return string(all.Payload), string(c.do(m).Payload)
	}
	wk, coll := listed()
	if strings.Contains(wk, "</"+data+">") || strings.Contains(coll, "</"+data+">") || !strings.Contains(wk, "</"+conf+">") {
		t.Fatalf("half created: /.well-known/core %q, /ps?rt=core.ps.data %q: want the topic, not its data", wk, coll)
	}
	if r := publishTo(t, c, data, "1"); r.Code != codes.Created {
		t.Fatalf("PUT: %v", r.Code)
	}
	if wk, coll = listed(); !strings.Contains(wk, "</"+data+">") || !strings.Contains(coll, "</"+data+">") {
		t.Fatalf("fully created: /.well-known/core %q, /ps?rt=core.ps.data %q: want its data", wk, coll)
	}
	if r := c.do(req(codes.DELETE, data)); r.Code != codes.Deleted {
		t.Fatalf("DELETE data: %v", r.Code)
	}
	if wk, coll = listed(); strings.Contains(wk, "</"+data+">") || strings.Contains(coll, "</"+data+">") {
		t.Fatalf("half created again: /.well-known/core %q, /ps?rt=core.ps.data %q", wk, coll)
	}
}

// TestClientChosenTopicData: a topic-data URI given at creation is used if
// it is a free, valid path on the broker; otherwise the creation is refused
// (4.00 invalid or reserved, 4.03 another topic's) with a diagnostic.
func TestClientChosenTopicData(t *testing.T) {
	topics := &memTopics{}
	_, c := startFront(t, topics)
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "chosen/t"}, 1: {kind: 3, s: "/sensors/room1"}, 2: {kind: 3, s: "core.ps.data"}})
	r := c.do(create)
	got, err := decodeCBORMap(r.Payload)
	if r.Code != codes.Created || err != nil || got[1].s != "/sensors/room1" {
		t.Fatalf("create with topic-data /sensors/room1: %v %v %v", r.Code, got, err)
	}
	if r := publishTo(t, c, "sensors/room1", "20"); r.Code != codes.Created {
		t.Fatalf("PUT /sensors/room1: %v %s", r.Code, r.Payload)
	}
	if r := c.do(req(codes.GET, "t/chosen/t")); string(r.Payload) != "20" {
		t.Fatalf("the publication did not reach topic chosen/t: %v %q", r.Code, r.Payload)
	}
	if r := c.do(req(codes.GET, "sensors/room1", uintOpt(message.Observe, 0))); r.Code != codes.Content || !r.Options.HasOption(message.Observe) {
		t.Fatalf("observe /sensors/room1: %v", r.Code)
	}
	for _, tc := range []struct {
		uri  string
		want codes.Code
	}{
		{"/sensors/room1", codes.Forbidden}, // another topic's
		{"coap://other.example/x", codes.BadRequest},
		{"sensors/rel", codes.BadRequest},
		{"//host/x", codes.BadRequest},
		{"/a/../b", codes.BadRequest},
		{"/a?b=1", codes.BadRequest},
		{"/a%20b", codes.BadRequest},
		{"/a//b", codes.BadRequest},
		{"/t/x", codes.BadRequest},
		{"/ps", codes.BadRequest},
		{"/ps/abc", codes.BadRequest},
		{"/.well-known/core", codes.BadRequest},
	} {
		create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
		create.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "chosen/other"}, 1: {kind: 3, s: tc.uri}, 2: {kind: 3, s: "core.ps.data"}})
		if r := c.do(create); r.Code != tc.want || len(r.Payload) == 0 {
			t.Fatalf("topic-data %q: %v %q, want %v with a diagnostic", tc.uri, r.Code, r.Payload, tc.want)
		}
	}
}

// TestCBORLibraryDecoding: property maps are decoded by a complete CBOR
// decoder (github.com/fxamacker/cbor/v2): every well-formed encoding of a
// valid map is accepted (indefinite lengths, half-precision floats,
// non-shortest heads), and what RFC 8949 calls invalid is refused
// (duplicate keys, text that is not UTF-8), as are huge declared lengths,
// without allocating them.
func TestCBORLibraryDecoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"indefinite-length map", []byte{0xbf, 0x00, 0x63, 'a', '/', 'b', 0xff}, true},
		{"indefinite-length text", []byte{0xa1, 0x00, 0x7f, 0x61, 'a', 0x62, '/', 'b', 0xff}, true},
		{"tag 1 around a half-precision float", []byte{0xa1, 0x05, 0xc1, 0xf9, 0x3e, 0x00}, true},
		{"tag 1 around a double", []byte{0xa1, 0x05, 0xc1, 0xfb, 0x41, 0xd9, 0x53, 0xf1, 0x00, 0x20, 0x00, 0x00}, true},
		{"non-shortest key", []byte{0xa1, 0x18, 0x00, 0x00}, true},
		{"duplicate key", []byte{0xa2, 0x00, 0x00, 0x00, 0x01}, false},
		{"duplicate key, non-shortest", []byte{0xa2, 0x00, 0x00, 0x18, 0x00, 0x01}, false},
		{"invalid UTF-8 text", []byte{0xa1, 0x00, 0x62, 0xff, 0xfe}, false},
		{"tag 1 around NaN", []byte{0xa1, 0x05, 0xc1, 0xf9, 0x7e, 0x00}, false},
		{"tag 1 around text", []byte{0xa1, 0x05, 0xc1, 0x61, 'x'}, false},
		{"2^64-1 pairs declared", []byte{0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"text of 2^64-1 bytes declared", []byte{0xa1, 0x00, 0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"null key", []byte{0xa1, 0xf6, 0x00}, false},
		{"trailing byte", []byte{0xa1, 0x00, 0x00, 0x00}, false},
	} {
		m, err := decodeCBORMap(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s (% x): %v, %v; want accepted %v", tc.name, tc.in, m, err, tc.ok)
		}
	}
	// End to end: a topic created with an indefinite-length map.
	_, c := startFront(t, &memTopics{})
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = append([]byte{0xbf, 0x00, 0x65}, "indef"...)
	create.Payload = append(append(append(create.Payload, 0x02, 0x6c), "core.ps.data"...), 0xff)
	if r := c.do(create); r.Code != codes.Created {
		t.Fatalf("create with an indefinite-length map: %v %s", r.Code, r.Payload)
	}
}
