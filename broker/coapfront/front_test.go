package coapfront

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapmsg"
)

// memTopics is an in-memory topic space (exact-topic and "#" subscribers)
// with an ACL function.
type memTopics struct {
	mu    sync.Mutex
	subs  map[int]func(string, []byte)
	next  int
	pubs  []string
	allow func(user string, anonymous bool, topic string, write bool) bool
}

func (m *memTopics) Publish(topic string, payload []byte, qos byte, retain bool) error {
	m.mu.Lock()
	m.pubs = append(m.pubs, topic+"="+string(payload))
	var fns []func(string, []byte)
	for _, f := range m.subs {
		fns = append(fns, f)
	}
	m.mu.Unlock()
	for _, f := range fns {
		f(topic, payload)
	}
	return nil
}

func (m *memTopics) Subscribe(filter string, fn func(string, []byte)) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[int]func(string, []byte){}
	}
	m.next++
	id := m.next
	m.subs[id] = fn
	return func() { m.mu.Lock(); delete(m.subs, id); m.mu.Unlock() }, nil
}

func (m *memTopics) Authorize(user string, anonymous bool, topic string, write bool) bool {
	if m.allow == nil {
		return true
	}
	return m.allow(user, anonymous, topic, write)
}

type rawClient struct {
	t    testing.TB
	ep   *coapmsg.Endpoint
	peer net.Addr
}

func startFront(t *testing.T, topics *memTopics) (*Front, *rawClient) { return startFrontTB(t, topics) }

func startFrontTB(t testing.TB, topics *memTopics) (*Front, *rawClient) {
	t.Helper()
	return startFrontOpts(t, topics, Options{})
}

func startFrontOpts(t testing.TB, topics *memTopics, o Options) (*Front, *rawClient) {
	t.Helper()
	f, err := New(topics, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	addr, err := f.ListenUDP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return f, &rawClient{t: t, ep: clientEndpoint(t), peer: addr}
}

// clientEndpoint is a client's CoAP message layer on a UDP socket of its
// own, closed when the test ends.
func clientEndpoint(t testing.TB) *coapmsg.Endpoint {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := coapmsg.New(pc, coapmsg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	return ep
}

func req(code codes.Code, path string, opts ...message.Option) *message.Message {
	m := &message.Message{Type: message.Confirmable, Code: code, Token: coapmsg.NewToken()}
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		m.Options = m.Options.Add(message.Option{ID: message.URIPath, Value: []byte(seg)})
	}
	for _, o := range opts {
		m.Options = m.Options.Add(o)
	}
	return m
}

func uintOpt(id message.OptionID, v uint32) message.Option {
	b := make([]byte, 4)
	n, _ := message.EncodeUint32(b, v)
	return message.Option{ID: id, Value: b[:n]}
}

// do sends a CON request and returns the piggy-backed response.
func (c *rawClient) do(m *message.Message) *message.Message {
	c.t.Helper()
	ch := make(chan *message.Message, 1)
	errc := make(chan error, 1)
	if err := c.ep.Send(c.peer, m, func(ack *message.Message, err error) {
		if err != nil {
			errc <- err
			return
		}
		ch <- ack
	}); err != nil {
		c.t.Fatal(err)
	}
	select {
	case r := <-ch:
		return r
	case err := <-errc:
		c.t.Fatal(err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("no response in 10s")
	}
	return nil
}

func TestPubSubDraftFlow(t *testing.T) {
	topics := &memTopics{}
	f, c := startFront(t, topics)
	// Discovery.
	r := c.do(req(codes.GET, ".well-known/core", message.Option{ID: message.URIQuery, Value: []byte("rt=core.ps")}))
	if r.Code != codes.Content || !strings.Contains(string(r.Payload), `</ps>;rt="core.ps core.ps.coll"`) {
		t.Fatalf("discovery: %v %q", r.Code, r.Payload)
	}
	// Create a topic: CBOR {0: "sensors/temp", 2: "core.ps.data", 3: 60}.
	props := encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "sensors/temp"}, 2: {kind: 3, s: "core.ps.data"}, 3: {kind: 0, u: 60}})
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = props
	r = c.do(create)
	if r.Code != codes.Created {
		t.Fatalf("create: %v %s", r.Code, r.Payload)
	}
	loc, _ := r.Options.LocationPath()
	loc = strings.TrimPrefix(loc, "/")
	got, err := decodeCBORMap(r.Payload)
	if err != nil || got[0].s != "sensors/temp" || got[1].kind != 3 || got[2].s != "core.ps.data" {
		t.Fatalf("create reply %v %v", got, err)
	}
	data := strings.TrimPrefix(got[1].s, "/")
	if !strings.HasPrefix(loc, "ps/") || data == "" {
		t.Fatalf("location %q, topic-data %q", loc, data)
	}
	// The same name again: 4.00. Wrong content format: 4.15.
	create.Token, create.MessageID = coapmsg.NewToken(), 0
	if r = c.do(create); r.Code != codes.BadRequest {
		t.Fatalf("duplicate topic-name: %v", r.Code)
	}
	if r = c.do(req(codes.POST, "ps", uintOpt(message.ContentFormat, 60))); r.Code != codes.UnsupportedMediaType {
		t.Fatalf("wrong content format: %v", r.Code)
	}
	// Half created: subscribe refused with 4.04.
	if r = c.do(req(codes.GET, data, uintOpt(message.Observe, 0))); r.Code != codes.NotFound {
		t.Fatalf("observe before first publication: %v", r.Code)
	}
	// First publication 2.01, then 2.04; it reaches the topic space.
	put := req(codes.PUT, data)
	put.Payload = []byte("21.5")
	if r = c.do(put); r.Code != codes.Created {
		t.Fatalf("first PUT: %v", r.Code)
	}
	put = req(codes.PUT, data)
	put.Payload = []byte("22.0")
	if r = c.do(put); r.Code != codes.Changed {
		t.Fatalf("second PUT: %v", r.Code)
	}
	topics.mu.Lock()
	pubs := strings.Join(topics.pubs, ",")
	topics.mu.Unlock()
	if pubs != "sensors/temp=21.5,sensors/temp=22.0" {
		t.Fatalf("published %s", pubs)
	}
	// Observe: the current value, then a publication from the topic space
	// (e.g. MQTT) as a notification; the direct path is the same topic.
	obs := req(codes.GET, data, uintOpt(message.Observe, 0))
	notes := make(chan *message.Message, 4)
	cancel := c.ep.HandleToken(c.peer, obs.Token, func(m *message.Message) { notes <- m })
	defer cancel()
	r = c.do(obs)
	if r.Code != codes.Content || string(r.Payload) != "22.0" {
		t.Fatalf("observe: %v %q", r.Code, r.Payload)
	}
	<-notes // the registration response, also routed to the token handler
	_ = topics.Publish("sensors/temp", []byte("23.1"), 1, false)
	select {
	case n := <-notes:
		if _, err := n.Options.Observe(); err != nil || string(n.Payload) != "23.1" {
			t.Fatalf("notification %v %q", n.Code, n.Payload)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	if r = c.do(req(codes.GET, "t/sensors/temp")); string(r.Payload) != "23.1" {
		t.Fatalf("direct GET: %q", r.Payload)
	}
	// DELETE the topic-data: observers get 4.04, the topic is half created.
	if r = c.do(req(codes.DELETE, data)); r.Code != codes.Deleted {
		t.Fatalf("delete: %v", r.Code)
	}
	select {
	case n := <-notes:
		if n.Code != codes.NotFound {
			t.Fatalf("final notification %v", n.Code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no final 4.04")
	}
	if s := f.Stats(); s.Observers != 0 || s.Publishes != 2 {
		t.Fatalf("stats %+v", s)
	}
	// Delete the topic.
	if r = c.do(req(codes.DELETE, loc)); r.Code != codes.Deleted {
		t.Fatalf("delete topic: %v", r.Code)
	}
	if r = c.do(req(codes.GET, loc)); r.Code != codes.NotFound {
		t.Fatalf("deleted topic still there: %v", r.Code)
	}
}

func TestBadRequestsCounted(t *testing.T) {
	f, c := startFront(t, &memTopics{})
	// Unknown critical option 9 -> 4.02.
	if r := c.do(req(codes.GET, "t/a", message.Option{ID: 9, Value: []byte{1}})); r.Code != codes.BadOption {
		t.Fatalf("want 4.02, got %v", r.Code)
	}
	// Not a CoAP message.
	conn, err := net.Dial("udp", c.peer.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("hello, not coap"))
	// Wildcards in the direct path: 4.00.
	if r := c.do(req(codes.PUT, "t/a/+")); r.Code != codes.BadRequest {
		t.Fatalf("wildcard: %v", r.Code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := f.Stats().Message
		if s.BadOptions == 1 && s.BadDatagrams == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestACLDenied(t *testing.T) {
	f, c := startFront(t, &memTopics{allow: func(user string, anonymous bool, topic string, write bool) bool {
		return !write || strings.HasPrefix(topic, "open/")
	}})
	if r := c.do(req(codes.PUT, "t/closed/x")); r.Code != codes.Forbidden {
		t.Fatalf("want 4.03, got %v", r.Code)
	}
	if r := c.do(req(codes.PUT, "t/open/x")); r.Code != codes.Created {
		t.Fatalf("want 2.01, got %v", r.Code)
	}
	if f.Stats().Denied != 1 {
		t.Fatal("denied not counted")
	}
}

func TestCBORRoundTrip(t *testing.T) {
	in := map[uint64]cborValue{0: {kind: 3, s: "a/b"}, 3: {kind: 0, u: 112}, 5: {kind: 6, u: 1700000000}, 8: {kind: 2, s: "\x00\x01"}, 300: {kind: 0, u: 1 << 40},
		9: {kind: 6, num: 7, f: 1700000000.25}, 10: {kind: 6, num: 1, i: -5}, 11: {kind: 6, num: 7, f: 1.5}}
	out, err := decodeCBORMap(encodeCBORMap(in))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range in {
		if out[k] != v {
			t.Fatalf("key %d: %+v != %+v", k, out[k], v)
		}
	}
	for _, bad := range [][]byte{nil, {0x80}, {0xa1, 0x61, 0x61, 0x01}, {0xa1, 0x00}, {0xa1, 0x00, 0x63, 0x61}} {
		if _, err := decodeCBORMap(bad); err == nil {
			t.Fatalf("% x accepted", bad)
		}
	}
}

// TestObserverRemoval: an observer that rejects a NON notification with RST
// is removed, and so is one whose CON notification is never acknowledged
// (RFC 7641 sections 3.6 and 4.5).
func TestObserverRemoval(t *testing.T) {
	topics := &memTopics{}
	f, err := New(topics, Options{Params: coapmsg.Params{AckTimeout: 30 * time.Millisecond, MaxRetransmit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr, err := f.ListenUDP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	observers := func() int64 { return f.Stats().Observers }
	waitObservers := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for observers() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d observers, want %d", observers(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	newClient := func() *rawClient {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ep, err := coapmsg.New(pc, coapmsg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ep.Close() })
		return &rawClient{t: t, ep: ep, peer: addr}
	}
	// NON registration: NON notifications; forgetting the token makes the
	// client answer the next one with RST.
	c := newClient()
	obs := req(codes.GET, "t/r/non", uintOpt(message.Observe, 0))
	obs.Type = message.NonConfirmable
	got := make(chan *message.Message, 4)
	cancel := c.ep.HandleToken(c.peer, obs.Token, func(m *message.Message) { got <- m })
	if err := c.ep.Send(c.peer, obs, nil); err != nil {
		t.Fatal(err)
	}
	<-got
	waitObservers(1)
	_ = topics.Publish("r/non", []byte("1"), 0, false)
	if n := <-got; n.Type != message.NonConfirmable || string(n.Payload) != "1" {
		t.Fatalf("want a NON notification, got %v %q", n.Type, n.Payload)
	}
	cancel()
	_ = topics.Publish("r/non", []byte("2"), 0, false)
	waitObservers(0)
	// CON registration, then the client disappears: the CON notification
	// times out and the observer is removed.
	c2 := newClient()
	obs = req(codes.GET, "t/r/con", uintOpt(message.Observe, 0))
	if r := c2.do(obs); r.Code != codes.Content {
		t.Fatalf("register: %v", r.Code)
	}
	waitObservers(1)
	_ = c2.ep.Close()
	_ = topics.Publish("r/con", []byte("x"), 1, false)
	waitObservers(0)
	if s := f.Stats(); s.NotifyFailures != 1 || s.Message.Timeouts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFloodDoesNotDisturbOthers: one peer sends 3000 CON PUTs without
// waiting; another client's request is still answered, and the flood is
// bounded by the peer's queue (excess answered 5.03 and counted).
func TestFloodDoesNotDisturbOthers(t *testing.T) {
	topics := &memTopics{}
	f, c := startFront(t, topics)
	flood, err := net.Dial("udp", c.peer.String())
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3000; i++ {
			m := req(codes.PUT, "t/flood")
			m.MessageID = int32(i)
			m.Payload = []byte("x")
			b, _ := coapmsg.Encode(m)
			_, _ = flood.Write(b)
		}
	}()
	r := c.do(req(codes.GET, "t/flood"))
	if r.Code != codes.Content && r.Code != codes.NotFound {
		t.Fatalf("other client got %v", r.Code)
	}
	<-done
	// Wait until the flood is worked off (the kernel may have dropped part
	// of the burst): every datagram received was a request that was
	// either handled or refused as overload.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := f.Stats()
		if s.Requests+s.Message.Overload == s.Message.Received && s.Message.Received > 1 {
			t.Logf("received %d, handled %d, overload %d", s.Message.Received, s.Requests, s.Message.Overload)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flood not worked off: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := c.do(req(codes.GET, "t/flood")); r.Code != codes.Content {
		t.Fatalf("after the flood: %v", r.Code)
	}
}

// createTopic POSTs props to /ps and returns the configuration and data
// paths.
func createTopic(t *testing.T, c *rawClient, props map[uint64]cborValue) (conf, data string) {
	t.Helper()
	create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	create.Payload = encodeCBORMap(props)
	r := c.do(create)
	if r.Code != codes.Created {
		t.Fatalf("create %v: %v %s", props, r.Code, r.Payload)
	}
	loc, _ := r.Options.LocationPath()
	got, err := decodeCBORMap(r.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(loc, "/"), strings.TrimPrefix(got[1].s, "/")
}

// TestMaxSubscribers: beyond the topic's max-subscribers an Observe
// registration gets the value without the Observe option (not subscribed,
// as the draft says); re-registering is allowed; a freed place is taken.
func TestMaxSubscribers(t *testing.T) {
	f, c := startFront(t, &memTopics{})
	_, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "lim/t"}, 2: {kind: 3, s: "core.ps.data"}, 6: {kind: 0, u: 1}})
	put := req(codes.PUT, data)
	put.Payload = []byte("v1")
	if r := c.do(put); r.Code != codes.Created {
		t.Fatalf("PUT: %v", r.Code)
	}
	first := req(codes.GET, data, uintOpt(message.Observe, 0))
	if r := c.do(first); r.Code != codes.Content || !r.Options.HasOption(message.Observe) {
		t.Fatalf("first observer: %v, observe option %v", r.Code, r.Options.HasOption(message.Observe))
	}
	second := req(codes.GET, data, uintOpt(message.Observe, 0))
	r := c.do(second)
	if r.Code != codes.Content || string(r.Payload) != "v1" || r.Options.HasOption(message.Observe) {
		t.Fatalf("second observer beyond max-subscribers 1: %v %q, observe option %v (want the value, no Observe)", r.Code, r.Payload, r.Options.HasOption(message.Observe))
	}
	// The direct form of the same MQTT topic is not the topic-data resource: no limit.
	if r := c.do(req(codes.GET, "t/lim/t", uintOpt(message.Observe, 0))); !r.Options.HasOption(message.Observe) {
		t.Fatal("direct-form observer refused")
	}
	again := req(codes.GET, data, uintOpt(message.Observe, 0))
	again.Token = first.Token
	if r := c.do(again); !r.Options.HasOption(message.Observe) {
		t.Fatal("re-registration of the first observer refused")
	}
	cancel := req(codes.GET, data, uintOpt(message.Observe, 1))
	cancel.Token = first.Token
	c.do(cancel)
	second.Token, second.MessageID = coapmsg.NewToken(), 0
	if r := c.do(second); !r.Options.HasOption(message.Observe) {
		t.Fatal("a freed place was not given to the next observer")
	}
	if s := f.Stats(); s.ObserveRefused != 1 || s.Observers != 2 {
		t.Fatalf("stats %+v: want 1 refused, 2 observers", s)
	}
}

// TestExpirationDate: a topic is deleted at its expiration-date (its
// observer gets 4.04, its configuration is gone); an expiration-date in the
// past and properties of the wrong type are refused with 4.00.
func TestExpirationDate(t *testing.T) {
	f, c := startFront(t, &memTopics{})
	bad := map[uint64]cborValue{0: {kind: 3, s: "exp/t"}, 2: {kind: 3, s: "core.ps.data"}, 5: {kind: 6, u: uint64(time.Now().Unix() - 10)}}
	for _, props := range []map[uint64]cborValue{
		bad,
		{0: {kind: 3, s: "exp/t"}, 2: {kind: 3, s: "core.ps.data"}, 6: {kind: 3, s: "ten"}},
		{0: {kind: 3, s: "exp/t"}, 2: {kind: 3, s: "core.ps.data"}, 9: {kind: 0, u: 1}},
	} {
		create := req(codes.POST, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
		create.Payload = encodeCBORMap(props)
		if r := c.do(create); r.Code != codes.BadRequest {
			t.Fatalf("create %v: %v %s, want 4.00", props, r.Code, r.Payload)
		}
	}
	at := time.Now().Add(1500 * time.Millisecond).Unix()
	conf, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "exp/t"}, 2: {kind: 3, s: "core.ps.data"},
		3: {kind: 0, u: 0}, 5: {kind: 6, u: uint64(at)}, 8: {kind: 2, s: "init"}})
	obs := req(codes.GET, data, uintOpt(message.Observe, 0))
	notes := make(chan *message.Message, 4)
	cancel := c.ep.HandleToken(c.peer, obs.Token, func(m *message.Message) { notes <- m })
	defer cancel()
	if r := c.do(obs); r.Code != codes.Content || string(r.Payload) != "init" {
		t.Fatalf("observe: %v %q", r.Code, r.Payload)
	}
	<-notes // the registration response
	select {
	case n := <-notes:
		if n.Code != codes.NotFound {
			t.Fatalf("notification at expiry: %v, want 4.04", n.Code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no 4.04 within 10s of the expiration-date")
	}
	if time.Now().Unix() < at {
		t.Fatal("the topic expired before its expiration-date")
	}
	if r := c.do(req(codes.GET, conf)); r.Code != codes.NotFound {
		t.Fatalf("expired topic's configuration: %v", r.Code)
	}
	if s := f.Stats(); s.Expired != 1 || s.Observers != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestConfigFetchPatch: FETCH /ps filters topics, FETCH /ps/<id> returns
// the named properties, iPATCH merges, POST replaces (immutable ones may
// not change), a PUT in another content format than the topic's gets 4.15,
// FETCH and iPATCH on topic-data get 4.05.
func TestConfigFetchPatch(t *testing.T) {
	_, c := startFront(t, &memTopics{})
	conf, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "cfg/a"}, 2: {kind: 3, s: "core.ps.data"}, 3: {kind: 0, u: 60}, 4: {kind: 3, s: "temperature"}})
	createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "cfg/b"}, 2: {kind: 3, s: "core.ps.data"}, 4: {kind: 3, s: "humidity"}})
	fetch := req(codeFETCH, "ps", uintOpt(message.ContentFormat, DefaultContentFormat))
	fetch.Payload = encodeCBORMap(map[uint64]cborValue{4: {kind: 3, s: "temperature"}})
	if r := c.do(fetch); r.Code != codes.Content || string(r.Payload) != "</"+conf+">;rt=core.ps.conf" {
		t.Fatalf("FETCH /ps: %v %q", r.Code, r.Payload)
	}
	fetch = req(codeFETCH, conf, uintOpt(message.ContentFormat, 60))
	fetch.Payload = []byte{0x82, 0x00, 0x03} // [0, 3]
	r := c.do(fetch)
	got, err := decodeCBORMap(r.Payload)
	if r.Code != codes.Content || err != nil || len(got) != 2 || got[0].s != "cfg/a" || got[3].u != 60 {
		t.Fatalf("FETCH %s: %v %v %v", conf, r.Code, got, err)
	}
	patch := req(codeIPATCH, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	patch.Payload = encodeCBORMap(map[uint64]cborValue{6: {kind: 0, u: 5}})
	r = c.do(patch)
	got, _ = decodeCBORMap(r.Payload)
	if r.Code != codes.Changed || got[6].u != 5 || got[4].s != "temperature" {
		t.Fatalf("iPATCH: %v %v", r.Code, got)
	}
	patch = req(codeIPATCH, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	patch.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "cfg/other"}})
	if r = c.do(patch); r.Code != codes.BadRequest {
		t.Fatalf("iPATCH of topic-name: %v, want 4.00", r.Code)
	}
	post := req(codes.POST, conf, uintOpt(message.ContentFormat, DefaultContentFormat))
	post.Payload = encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "cfg/a"}, 3: {kind: 0, u: 0}})
	r = c.do(post)
	got, _ = decodeCBORMap(r.Payload)
	if _, kept := got[4]; r.Code != codes.Changed || kept || got[3].u != 0 || got[2].s != "core.ps.data" {
		t.Fatalf("POST (replace): %v %v", r.Code, got)
	}
	put := req(codes.PUT, data, uintOpt(message.ContentFormat, 50))
	put.Payload = []byte(`{"t":1}`)
	if r = c.do(put); r.Code != codes.UnsupportedMediaType {
		t.Fatalf("PUT in format 50 to a topic of format 0: %v, want 4.15", r.Code)
	}
	for _, code := range []codes.Code{codeFETCH, codeIPATCH} {
		if r = c.do(req(code, data)); r.Code != codes.MethodNotAllowed {
			t.Fatalf("%v on topic-data: %v, want 4.05", code, r.Code)
		}
	}
}

// TestContentFormatAndObserverCheck: the content-format number of topic
// creation is configurable; with non-confirmable notifications an observer
// still gets a confirmable one once observer_check has passed since the
// last (RFC 7641 section 4.5).
func TestContentFormatAndObserverCheck(t *testing.T) {
	topics := &memTopics{}
	_, c := startFrontOpts(t, topics, Options{ContentFormat: 65001, Notifications: NotifyNON, ObserverCheck: 2 * time.Second})
	props := encodeCBORMap(map[uint64]cborValue{0: {kind: 3, s: "cf/t"}, 2: {kind: 3, s: "core.ps.data"}})
	for _, tc := range []struct {
		cf   uint32
		want codes.Code
	}{{DefaultContentFormat, codes.UnsupportedMediaType}, {65001, codes.Created}} {
		create := req(codes.POST, "ps", uintOpt(message.ContentFormat, tc.cf))
		create.Payload = props
		if r := c.do(create); r.Code != tc.want {
			t.Fatalf("create with Content-Format %d: %v, want %v", tc.cf, r.Code, tc.want)
		}
	}
	obs := req(codes.GET, "t/cf/o", uintOpt(message.Observe, 0))
	notes := make(chan *message.Message, 8)
	cancel := c.ep.HandleToken(c.peer, obs.Token, func(m *message.Message) { notes <- m })
	defer cancel()
	c.do(obs)
	<-notes // the registration response
	next := func() message.Type {
		t.Helper()
		select {
		case n := <-notes:
			return n.Type
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
		}
		return 0
	}
	_ = topics.Publish("cf/o", []byte("1"), 0, false)
	if typ := next(); typ != message.NonConfirmable {
		t.Fatalf("notification right after registering: %v, want NON", typ)
	}
	time.Sleep(2100 * time.Millisecond)
	_ = topics.Publish("cf/o", []byte("2"), 0, false)
	if typ := next(); typ != message.Confirmable {
		t.Fatalf("notification after observer_check: %v, want CON", typ)
	}
}

// rstFirstSink is a UDP-like sink whose peer's RST is read before send
// returns, as happens on loopback when the sending goroutine is
// descheduled right after the write.
type rstFirstSink struct {
	f    *Front
	peer net.Addr
	mid  uint16
	tc   transportCounters
}

func (s *rstFirstSink) key() string                  { return datagramKey("test", s.peer) }
func (s *rstFirstSink) confirmable() bool            { return false }
func (s *rstFirstSink) counters() *transportCounters { return &s.tc }
func (s *rstFirstSink) send(m *message.Message, con bool, done func(error)) (uint16, error) {
	s.mid++
	s.f.onReset("test", s.peer, s.mid) // the client's RST, before the sender records the ID
	if done != nil {
		done(nil)
	}
	return s.mid, nil
}

// TestObserverRemovedByEarlyRST: an RST that arrives before the NON
// notification's message ID was recorded still ends the observation (CI
// saw TestObserverRemoval keep the observer: the RST had been read first).
func TestObserverRemovedByEarlyRST(t *testing.T) {
	f, err := New(&memTopics{}, Options{Notifications: NotifyNON})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &rstFirstSink{f: f, peer: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5683}}
	if _, ok := f.register(s, "early/rst", message.Token("tok"), nil); !ok {
		t.Fatal("register refused")
	}
	if n := f.Stats().Observers; n != 1 {
		t.Fatalf("%d observers after register, want 1", n)
	}
	f.mu.Lock()
	o := f.byKey[obsKey(s, message.Token("tok"))]
	f.mu.Unlock()
	o.notify(f, codes.Content, []byte("x"))
	if n := f.Stats().Observers; n != 0 {
		t.Fatalf("%d observers after an early RST, want 0", n)
	}
}

// encodeCBORMap encodes topic properties as the front does (panics on
// error: test data only).
func encodeCBORMap(m map[uint64]cborValue) []byte {
	c, err := newCBORCodec()
	if err != nil {
		panic(err)
	}
	b, err := c.encodeMap(m)
	if err != nil {
		panic(err)
	}
	return b
}

// decodeCBORMap decodes topic properties as the front does.
func decodeCBORMap(b []byte) (map[uint64]cborValue, error) {
	c, err := newCBORCodec()
	if err != nil {
		return nil, err
	}
	return c.decodeMap(b)
}

// decodeCBORKeys decodes a FETCH's property numbers as the front does.
func decodeCBORKeys(b []byte) ([]uint64, error) {
	c, err := newCBORCodec()
	if err != nil {
		return nil, err
	}
	return c.decodeKeys(b)
}

// TestSamePeerOnTwoListeners: one client address with one token observes on
// two listeners (as a coap:// client and a coaps:// client do when the
// kernel gives the second the first's source port); they are two
// observations and each gets its notification on its own socket.
func TestSamePeerOnTwoListeners(t *testing.T) {
	topics := &memTopics{}
	f, err := New(topics, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var listeners [2]net.Addr
	for i := range listeners {
		if listeners[i], err = f.ListenUDP("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ep := clientEndpoint(t)
	token := coapmsg.NewToken()
	got := make(chan string, 8)
	for i, l := range listeners {
		c := &rawClient{t: t, ep: ep, peer: l}
		name := fmt.Sprintf("listener %d", i)
		defer ep.HandleToken(l, token, func(m *message.Message) {
			if len(m.Payload) > 0 {
				got <- name + ": " + string(m.Payload)
			}
		})()
		obs := req(codes.GET, "t/same", uintOpt(message.Observe, 0))
		obs.Token = token
		if r := c.do(obs); r.Code != codes.Content {
			t.Fatalf("register on %s: %v", name, r.Code)
		}
	}
	if n := f.Stats().Observers; n != 2 {
		t.Fatalf("%d observers after registering on two listeners from one address with one token, want 2", n)
	}
	_ = topics.Publish("same", []byte("x"), 0, false)
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case s := <-got:
			seen[s] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("notifications seen: %v, want one on each listener", seen)
		}
	}
}
