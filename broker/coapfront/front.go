package coapfront

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapdtls"
	"github.com/iotq/iotq/transport/coapmsg"
)

// Topics is what the front needs from the broker: the MQTT topic space and
// its ACL. Implementations are safe for concurrent use.
type Topics interface {
	// Publish puts a message into the topic space (MQTT subscribers and
	// local ones receive it; retain keeps it as the retained message; an
	// empty retained payload clears it). It may block briefly
	// (backpressure).
	Publish(topic string, payload []byte, qos byte, retain bool) error
	// Subscribe calls fn for every message published on a topic matching
	// the MQTT filter until cancel is called. fn must not block.
	Subscribe(filter string, fn func(topic string, payload []byte)) (cancel func(), err error)
	// Authorize reports whether user may read (write=false) or write topic.
	// anonymous: no identity (plain UDP, no PSK).
	Authorize(user string, anonymous bool, topic string, write bool) bool
}

// Notification types (Options.Notifications).
const (
	NotifyMatch = "match" // CON notifications for observers that registered with CON, NON for NON
	NotifyCON   = "con"   // always confirmable
	NotifyNON   = "non"   // non-confirmable (a CON one at least every ObserverCheck)
)

// DefaultContentFormat is the Content-Format number used for
// application/core-pubsub+cbor until IANA assigns one (the draft says
// TBD606); 65000 is in the experimental range 65000-65535.
const DefaultContentFormat = 65000

// Options configure the CoAP front. Zero values mean the documented
// defaults.
type Options struct {
	// Params are the RFC 7252 transmission parameters of UDP and DTLS
	// listeners (ack_timeout, ack_random_factor, max_retransmit, nstart,
	// exchange_lifetime, non_lifetime, cocoa).
	Params coapmsg.Params `yaml:"params"`
	// ContentFormat is the number of application/core-pubsub+cbor.
	// Default DefaultContentFormat (65000).
	ContentFormat int `yaml:"content_format"`
	// Notifications is NotifyMatch (default), NotifyCON or NotifyNON.
	Notifications string `yaml:"notifications"`
	// ObserverCheck is the longest time between two confirmable
	// notifications to an observer (RFC 7641 section 4.5). Default 24h.
	ObserverCheck time.Duration `yaml:"observer_check"`
	// BlockSize is the block size of block-wise transfers (RFC 7959): 16,
	// 32, ..., 1024. Default 1024.
	BlockSize int `yaml:"block_size"`
	// MaxPayload bounds a block-wise PUT. Default 1 MiB.
	MaxPayload int `yaml:"max_payload"`
	// MaxTopics bounds the latest-value cache (topics whose value GET can
	// read). Default 100000.
	MaxTopics int `yaml:"max_topics"`
	// PSKFile holds the DTLS PSK identities of coaps:// listeners, one
	// "identity:key" per line (key in plain text, or hex with a "0x"
	// prefix); '#' starts a comment. The identity is the user of the ACL.
	PSKFile string `yaml:"psk_file"`
	// DTLSSessions bounds the DTLS sessions coaps:// listeners keep for
	// resumption (abbreviated handshakes; the oldest go first). Default
	// 10000; negative: no resumption.
	DTLSSessions int `yaml:"dtls_sessions"`
	// DTLSSessionLifetime is how long after its full handshake a DTLS
	// session can be resumed. Default 24h.
	DTLSSessionLifetime time.Duration `yaml:"dtls_session_lifetime"`
	// Logger receives logs. nil: discard.
	Logger *slog.Logger `yaml:"-"`
}

// WithDefaults fills in defaults.
func (o Options) WithDefaults() Options {
	o.Params = o.Params.WithDefaults()
	if o.ContentFormat == 0 {
		o.ContentFormat = DefaultContentFormat
	}
	if o.Notifications == "" {
		o.Notifications = NotifyMatch
	}
	if o.ObserverCheck == 0 {
		o.ObserverCheck = 24 * time.Hour
	}
	if o.BlockSize == 0 {
		o.BlockSize = 1024
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = 1 << 20
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = 100000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports every bad field.
func (o Options) Validate() error {
	var errs []error
	if err := o.Params.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.ContentFormat < 0 || o.ContentFormat > 65535 {
		errs = append(errs, fmt.Errorf("content_format %d: want 0-65535 (experimental range 65000-65535)", o.ContentFormat))
	}
	switch o.Notifications {
	case "", NotifyMatch, NotifyCON, NotifyNON:
	default:
		errs = append(errs, fmt.Errorf("notifications %q: want match, con or non", o.Notifications))
	}
	if o.BlockSize != 0 && szxOf(o.BlockSize) < 0 {
		errs = append(errs, fmt.Errorf("block_size %d: want 16, 32, 64, 128, 256, 512 or 1024", o.BlockSize))
	}
	if o.MaxPayload < 0 || o.MaxTopics < 0 || o.ObserverCheck < 0 || o.DTLSSessionLifetime < 0 {
		errs = append(errs, errors.New("max_payload, max_topics, observer_check and dtls_session_lifetime must not be negative"))
	}
	return errors.Join(errs...)
}

// Stats are the front's counters.
type Stats struct {
	Requests       int64 // requests handled
	Publishes      int64 // PUTs published into the topic space
	Notifications  int64 // notifications sent
	NotifyFailures int64 // CON notifications not acknowledged (observer removed)
	Coalesced      int64 // notifications replaced by a newer value before they were sent
	Observers      int64 // current observers
	Denied         int64 // requests refused by the ACL
	// ObserveRefused counts Observe registrations answered without the
	// Observe option because the topic's max-subscribers was reached.
	ObserveRefused int64
	Expired        int64 // topics deleted at their expiration-date
	Message        coapmsg.Stats
	// ByTransport splits requests, publishes, notifications and
	// notification failures by the listener's URL scheme (coap, coaps,
	// coap+tcp, coaps+tcp, coap+quic); only schemes with a listener appear.
	ByTransport map[string]TransportStats
	// MessageByTransport splits the message-layer counters: "coap" (UDP)
	// and "coaps" (DTLS).
	MessageByTransport map[string]coapmsg.Stats
	// DTLS sums the handshake counters of the coaps listeners (full and
	// resumed handshakes, failures, stored sessions).
	DTLS coapdtls.Stats
}

// TransportStats are the counters of one transport.
type TransportStats struct {
	Requests, Publishes, Notifications, NotifyFailures int64
}

// transportCounters are the live counters behind TransportStats.
type transportCounters struct {
	requests, publishes, notifications, notifyFailures atomic.Int64
}

// datagramEndpoint is one UDP or DTLS listener.
type datagramEndpoint struct {
	ep     *coapmsg.Endpoint
	scheme string
	dtls   *coapdtls.Listener // nil for UDP
}

// Front serves CoAP on the broker's topic space. Create it with New, add
// listeners with ListenUDP / ListenDTLS / ServeStream, Close it once.
type Front struct {
	o      Options
	t      Topics
	log    *slog.Logger
	cancel func()
	seq    atomic.Uint32

	requests, publishes, notifications, notifyFailures, coalesced, denied atomic.Int64
	observeRefused, expired                                               atomic.Int64

	mu        sync.Mutex
	closed    bool
	latest    map[string][]byte
	observers map[string]map[*observer]struct{} // by MQTT topic
	byKey     map[string]*observer              // by client and token
	// earlyRST holds the last RSTs that matched no NON notification: a
	// client's RST can be read before the sender has recorded the
	// notification's message ID (see observer.transmit).
	earlyRST [16]struct {
		peer string
		mid  uint16
	}
	nEarlyRST int
	topics    map[string]*psTopic // pub-sub topics by id
	byName    map[string]string   // topic-name -> id
	byData    map[string]*psTopic // topic-data path (no leading "/") -> topic
	regs      uint64              // observer registrations so far (their order)
	cbor      *cborCodec          // topic property codec (immutable)
	blocks    map[string]*upload  // block-wise uploads by peer|path
	endpoints []datagramEndpoint
	streams   map[*streamConn]struct{}
	byScheme  map[string]*transportCounters // listener URL scheme -> counters
	wg        sync.WaitGroup
}

// psTopic is a topic created through the topic collection.
type psTopic struct {
	id       string
	name     string // MQTT topic
	props    map[uint64]cborValue
	dataPath string      // "ps/data/<id>" or the client's choice, without the leading "/"
	timer    *time.Timer // expiration-date; guarded by Front.mu
}

type upload struct {
	data    []byte
	next    uint32
	expires time.Time
}

// New starts the front on t: it subscribes to every topic ("#") to keep the
// latest value of each and to notify observers.
func New(t Topics, o Options) (*Front, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("coap: %w", err)
	}
	o = o.WithDefaults()
	codec, err := newCBORCodec()
	if err != nil {
		return nil, fmt.Errorf("coap: %w", err)
	}
	f := &Front{
		o: o, t: t, log: o.Logger, cbor: codec,
		latest:    map[string][]byte{},
		observers: map[string]map[*observer]struct{}{},
		byKey:     map[string]*observer{},
		topics:    map[string]*psTopic{},
		byName:    map[string]string{},
		byData:    map[string]*psTopic{},
		blocks:    map[string]*upload{},
		streams:   map[*streamConn]struct{}{},
		byScheme:  map[string]*transportCounters{},
	}
	cancel, err := t.Subscribe("#", f.onMessage)
	if err != nil {
		return nil, fmt.Errorf("coap: subscribe to the topic space: %w", err)
	}
	f.cancel = cancel
	return f, nil
}

// ListenUDP serves coap:// on addr (host:port; port 0 picks one) and
// returns the bound address.
func (f *Front) ListenUDP(addr string) (net.Addr, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("coap: listen udp %s: %w", addr, err)
	}
	if err := f.Serve(pc); err != nil {
		_ = pc.Close()
		return nil, err
	}
	return pc.LocalAddr(), nil
}

// countersLocked returns the counters of scheme. Called with f.mu held.
func (f *Front) countersLocked(scheme string) *transportCounters {
	tc := f.byScheme[scheme]
	if tc == nil {
		tc = &transportCounters{}
		f.byScheme[scheme] = tc
	}
	return tc
}

// Serve serves CoAP over a datagram socket (UDP, or a DTLS listener of
// package transport/coapdtls), which the front owns from now on. Its
// counters go under "coap" (UDP) or "coaps" (DTLS).
func (f *Front) Serve(pc net.PacketConn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return net.ErrClosed
	}
	de := datagramEndpoint{scheme: "coap"}
	if l, ok := pc.(*coapdtls.Listener); ok {
		de.scheme, de.dtls = "coaps", l
	}
	tc := f.countersLocked(de.scheme)
	local := de.scheme + "://" + pc.LocalAddr().String()
	// The handler may run before New returns: it waits for ep.
	var ep *coapmsg.Endpoint
	ready := make(chan struct{})
	get := func() *coapmsg.Endpoint { <-ready; return ep }
	ep, err := coapmsg.New(pc, coapmsg.Options{
		Params: f.o.Params,
		Handler: func(peer net.Addr, req *message.Message) *message.Message {
			return f.handleOn(&udpSink{f: f, ep: get(), local: local, peer: peer, con: req.Type == message.Confirmable, tc: tc}, peer, req)
		},
		Logger:  f.log,
		OnReset: func(peer net.Addr, mid uint16) { f.onReset(local, peer, mid) },
	})
	close(ready)
	if err != nil {
		return fmt.Errorf("coap: %w", err)
	}
	de.ep = ep
	f.endpoints = append(f.endpoints, de)
	return nil
}

// Stats returns the counters (message-layer counters summed over the UDP
// and DTLS listeners).
func (f *Front) Stats() Stats {
	s := Stats{
		Requests: f.requests.Load(), Publishes: f.publishes.Load(), Notifications: f.notifications.Load(),
		NotifyFailures: f.notifyFailures.Load(), Coalesced: f.coalesced.Load(), Denied: f.denied.Load(),
		ObserveRefused: f.observeRefused.Load(), Expired: f.expired.Load(),
	}
	f.mu.Lock()
	for _, set := range f.observers {
		s.Observers += int64(len(set))
	}
	eps := append([]datagramEndpoint(nil), f.endpoints...)
	s.ByTransport = map[string]TransportStats{}
	for scheme, tc := range f.byScheme {
		s.ByTransport[scheme] = TransportStats{Requests: tc.requests.Load(), Publishes: tc.publishes.Load(),
			Notifications: tc.notifications.Load(), NotifyFailures: tc.notifyFailures.Load()}
	}
	f.mu.Unlock()
	s.MessageByTransport = map[string]coapmsg.Stats{}
	for _, de := range eps {
		m := de.ep.Stats()
		s.Message = addMessageStats(s.Message, m)
		s.MessageByTransport[de.scheme] = addMessageStats(s.MessageByTransport[de.scheme], m)
		if de.dtls != nil {
			d := de.dtls.Stats()
			s.DTLS.Handshakes += d.Handshakes
			s.DTLS.Resumed += d.Resumed
			s.DTLS.HandshakeFailures += d.HandshakeFailures
			s.DTLS.Sessions += d.Sessions
		}
	}
	return s
}

func addMessageStats(a, m coapmsg.Stats) coapmsg.Stats {
	a.Sent += m.Sent
	a.Received += m.Received
	a.Retransmissions += m.Retransmissions
	a.Acknowledged += m.Acknowledged
	a.Timeouts += m.Timeouts
	a.ResetsReceived += m.ResetsReceived
	a.ResetsSent += m.ResetsSent
	a.Duplicates += m.Duplicates
	a.BadDatagrams += m.BadDatagrams
	a.BadOptions += m.BadOptions
	a.Overload += m.Overload
	a.Stray += m.Stray
	a.DedupFull += m.DedupFull
	return a
}

// Close stops every listener and stream and the topic-space subscription.
// Idempotent.
func (f *Front) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	for _, t := range f.topics {
		if t.timer != nil {
			t.timer.Stop()
		}
	}
	eps := f.endpoints
	var streams []*streamConn
	for s := range f.streams {
		streams = append(streams, s)
	}
	f.mu.Unlock()
	f.cancel()
	var errs []error
	for _, de := range eps {
		errs = append(errs, de.ep.Close())
	}
	for _, s := range streams {
		_ = s.c.Close()
	}
	f.wg.Wait()
	return errors.Join(errs...)
}

// onMessage runs for every message of the topic space (on the publisher's
// goroutine): remember the latest value and notify observers.
func (f *Front) onMessage(topic string, payload []byte) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	if _, ok := f.latest[topic]; ok || len(f.latest) < f.o.MaxTopics {
		f.latest[topic] = payload
	}
	var obs []*observer
	for o := range f.observers[topic] {
		obs = append(obs, o)
	}
	f.mu.Unlock()
	for _, o := range obs {
		o.notify(f, codes.Content, payload)
	}
}

// identity returns the authenticated identity of peer ("" if none).
func identity(peer net.Addr) string {
	if p, ok := peer.(interface{ Identity() string }); ok {
		return p.Identity()
	}
	return ""
}

func (f *Front) allowed(peer net.Addr, topic string, write bool) bool {
	user := identity(peer)
	if f.t.Authorize(user, user == "", topic, write) {
		return true
	}
	f.denied.Add(1)
	return false
}

func pathOf(m *message.Message) []string {
	var segs []string
	for _, o := range m.Options {
		if o.ID == message.URIPath {
			segs = append(segs, string(o.Value))
		}
	}
	return segs
}

func queriesOf(m *message.Message) []string {
	var qs []string
	for _, o := range m.Options {
		if o.ID == message.URIQuery {
			qs = append(qs, string(o.Value))
		}
	}
	return qs
}

func uintOption(m *message.Message, id message.OptionID) (uint32, bool) {
	v, err := m.Options.GetUint32(id)
	return v, err == nil
}

func resp(code codes.Code, payload string) *message.Message {
	return &message.Message{Code: code, Payload: []byte(payload)}
}

func addUint(m *message.Message, id message.OptionID, v uint32) {
	buf := make([]byte, 4)
	n, _ := message.EncodeUint32(buf, v)
	m.Options = m.Options.Add(message.Option{ID: id, Value: buf[:n]})
}

func addString(m *message.Message, id message.OptionID, s string) {
	m.Options = m.Options.Add(message.Option{ID: id, Value: []byte(s)})
}

// handleOn serves one request arriving through sink (a UDP/DTLS peer of a
// message-layer endpoint, or a stream).
func (f *Front) handleOn(sink sink, peer net.Addr, req *message.Message) *message.Message {
	f.requests.Add(1)
	sink.counters().requests.Add(1)
	path := pathOf(req)
	switch {
	case len(path) == 2 && path[0] == ".well-known" && path[1] == "core":
		if req.Code != codes.GET {
			return resp(codes.MethodNotAllowed, "")
		}
		return f.discovery(req)
	case len(path) == 1 && path[0] == "ps":
		return f.collection(peer, req)
	case len(path) == 2 && path[0] == "ps":
		return f.topicConfig(peer, req, path[1])
	}
	f.mu.Lock()
	t := f.byData[strings.Join(path, "/")]
	f.mu.Unlock()
	switch {
	case t != nil:
		return f.topicData(sink, peer, req, t.name, t)
	case len(path) == 3 && path[0] == "ps" && path[1] == "data":
		return resp(codes.NotFound, "no such topic")
	case len(path) >= 2 && path[0] == "t":
		topic := strings.Join(path[1:], "/")
		if topic == "" || strings.ContainsAny(topic, "+#") {
			return resp(codes.BadRequest, "want /t/<MQTT topic name> without wildcards")
		}
		return f.topicData(sink, peer, req, topic, nil)
	}
	return resp(codes.NotFound, "resources: /.well-known/core, /ps (topic collection), /t/<topic> (direct)")
}

// discovery answers GET /.well-known/core (with rt= filtering). The topic
// collection is both the broker (core.ps) and a collection (core.ps.coll):
// one rt attribute with space-separated values (RFC 6690 section 3.1). A
// topic-data resource is listed only once it exists, i.e. has data (a half
// created topic has none: draft section 3.1).
func (f *Front) discovery(req *message.Message) *message.Message {
	links := []struct{ link, rt string }{
		{`</ps>;rt="core.ps core.ps.coll";ct=40`, "core.ps core.ps.coll"},
	}
	f.mu.Lock()
	for _, t := range f.sortedTopicsLocked() {
		links = append(links, struct{ link, rt string }{fmt.Sprintf(`</ps/%s>;rt="core.ps.conf";ct=%d`, t.id, f.o.ContentFormat), "core.ps.conf"})
		if _, has := f.latest[t.name]; has {
			link := fmt.Sprintf(`</%s>;rt="core.ps.data";obs`, t.dataPath)
			if v, ok := t.props[propContentFmt]; ok {
				link += fmt.Sprintf(";ct=%d", v.u)
			}
			links = append(links, struct{ link, rt string }{link, "core.ps.data"})
		}
	}
	f.mu.Unlock()
	want := ""
	for _, q := range queriesOf(req) {
		if v, ok := strings.CutPrefix(q, "rt="); ok {
			want = v
		}
	}
	var out []string
	for _, l := range links {
		if want == "" || matchRT(l.rt, want) {
			out = append(out, l.link)
		}
	}
	r := resp(codes.Content, strings.Join(out, ","))
	addUint(r, message.ContentFormat, uint32(message.AppLinkFormat))
	return r
}

func matchRT(rts, want string) bool {
	for _, rt := range strings.Fields(rts) {
		if rt == want || (strings.HasSuffix(want, "*") && strings.HasPrefix(rt, strings.TrimSuffix(want, "*"))) {
			return true
		}
	}
	return false
}

// collection serves /ps: GET lists topics, POST creates one.
func (f *Front) collection(peer net.Addr, req *message.Message) *message.Message {
	switch req.Code {
	case codes.GET:
		data := false
		for _, q := range queriesOf(req) {
			if q == "rt=core.ps.data" {
				data = true
			}
		}
		var out []string
		f.mu.Lock()
		for _, t := range f.sortedTopicsLocked() {
			if data {
				if _, has := f.latest[t.name]; has { // half created: no topic-data resource yet
					out = append(out, fmt.Sprintf(`</%s>;rt=core.ps.data`, t.dataPath))
				}
			} else {
				out = append(out, fmt.Sprintf(`</ps/%s>;rt=core.ps.conf`, t.id))
			}
		}
		f.mu.Unlock()
		r := resp(codes.Content, strings.Join(out, ","))
		addUint(r, message.ContentFormat, uint32(message.AppLinkFormat))
		return r
	case codes.POST:
		if cf, ok := uintOption(req, message.ContentFormat); !ok || int(cf) != f.o.ContentFormat {
			return resp(codes.UnsupportedMediaType, fmt.Sprintf("want Content-Format %d (application/core-pubsub+cbor)", f.o.ContentFormat))
		}
		props, err := f.cbor.decodeMap(req.Payload)
		if err != nil {
			return resp(codes.BadRequest, err.Error())
		}
		name, rt := props[0], props[2]
		if name.kind != 3 || name.s == "" || rt.kind != 3 {
			return resp(codes.BadRequest, "topic-name (0) and resource-type (2) are required text strings")
		}
		if rt.s != "core.ps.data" {
			return resp(codes.BadRequest, `resource-type (2) must be "core.ps.data"`)
		}
		if strings.ContainsAny(name.s, "+#") {
			return resp(codes.BadRequest, "topic-name is an MQTT topic name: no wildcards")
		}
		if err := checkProps(props, time.Now()); err != nil {
			return resp(codes.BadRequest, err.Error())
		}
		if err := checkComplete(props); err != nil {
			return resp(codes.BadRequest, err.Error())
		}
		var want string // the client's topic-data path, if it chose one
		if v, ok := props[propData]; ok {
			if want, err = dataPathOf(v.s); err != nil {
				return resp(codes.BadRequest, err.Error())
			}
		}
		if !f.allowed(peer, name.s, true) {
			return resp(codes.Forbidden, "the ACL does not allow writing this topic")
		}
		f.mu.Lock()
		if _, dup := f.byName[name.s]; dup {
			f.mu.Unlock()
			return resp(codes.BadRequest, "topic-name already in use")
		}
		if want != "" && f.byData[want] != nil {
			f.mu.Unlock()
			return resp(codes.Forbidden, fmt.Sprintf("topic-data (%d) /%s is another topic's", propData, want))
		}
		id := f.newTopicIDLocked()
		t := &psTopic{id: id, name: name.s, props: props, dataPath: "ps/data/" + id}
		if want != "" {
			t.dataPath = want
		}
		t.props[propData] = cborValue{kind: 3, s: "/" + t.dataPath}
		f.topics[id] = t
		f.byName[name.s] = id
		f.byData[t.dataPath] = t
		f.scheduleExpiryLocked(t)
		reply := maps.Clone(t.props)
		init, hasInit := props[propInitialize]
		f.mu.Unlock()
		if hasInit && init.kind == 2 {
			if err := f.t.Publish(name.s, []byte(init.s), 1, true); err != nil {
				f.log.Warn("coap: initialize topic", "topic", name.s, "error", err)
			}
		}
		r := f.propsResponse(codes.Created, reply)
		if r.Code == codes.Created {
			addString(r, message.LocationPath, "ps")
			addString(r, message.LocationPath, id)
		}
		return r
	case codeFETCH:
		return f.fetchCollection(peer, req)
	}
	return resp(codes.MethodNotAllowed, "GET, POST or FETCH")
}

// topicConfig serves /ps/<id>: GET the properties, FETCH some of them,
// POST replaces and iPATCH updates them, DELETE removes the topic.
func (f *Front) topicConfig(peer net.Addr, req *message.Message, id string) *message.Message {
	f.mu.Lock()
	t := f.topics[id]
	f.mu.Unlock()
	if t == nil {
		return resp(codes.NotFound, "no such topic")
	}
	switch req.Code {
	case codes.GET:
		if !f.allowed(peer, t.name, false) {
			return resp(codes.Forbidden, "the ACL does not allow reading this topic")
		}
		f.mu.Lock()
		props := maps.Clone(t.props)
		f.mu.Unlock()
		return f.propsResponse(codes.Content, props)
	case codeFETCH:
		if !f.allowed(peer, t.name, false) {
			return resp(codes.Forbidden, "the ACL does not allow reading this topic")
		}
		return f.fetchConfig(t, req)
	case codes.POST, codeIPATCH:
		if !f.allowed(peer, t.name, true) {
			return resp(codes.Forbidden, "the ACL does not allow writing this topic")
		}
		return f.updateConfig(t, req, req.Code == codes.POST)
	case codes.DELETE:
		if !f.allowed(peer, t.name, true) {
			return resp(codes.Forbidden, "the ACL does not allow writing this topic")
		}
		f.mu.Lock()
		gone := f.topics[id] != t
		if !gone {
			f.deleteTopicLocked(t)
		}
		f.mu.Unlock()
		if gone {
			return resp(codes.NotFound, "no such topic")
		}
		f.clear(t.name)
		return resp(codes.Deleted, "")
	}
	return resp(codes.MethodNotAllowed, "GET, FETCH, POST, iPATCH or DELETE")
}

// clear deletes the topic's value (an empty retained message clears the
// MQTT retained message too) and ends its observations with 4.04.
func (f *Front) clear(topic string) {
	f.mu.Lock()
	delete(f.latest, topic)
	var obs []*observer
	for o := range f.observers[topic] {
		obs = append(obs, o)
	}
	for _, o := range obs {
		f.removeLocked(o)
	}
	f.mu.Unlock()
	for _, o := range obs {
		o.notify(f, codes.NotFound, nil)
	}
	if err := f.t.Publish(topic, nil, 1, true); err != nil {
		f.log.Warn("coap: clear retained", "topic", topic, "error", err)
	}
	f.mu.Lock()
	delete(f.latest, topic) // the empty publication itself is no value
	f.mu.Unlock()
}

// topicData serves a topic-data resource (t the topic created in /ps) or
// a direct /t/ path (t nil).
func (f *Front) topicData(sink sink, peer net.Addr, req *message.Message, topic string, t *psTopic) *message.Message {
	ps := t != nil
	switch req.Code {
	case codes.PUT, codes.POST:
		if !f.allowed(peer, topic, true) {
			return resp(codes.Forbidden, "the ACL does not allow writing this topic")
		}
		if ps {
			f.mu.Lock()
			want, has := t.props[propContentFmt]
			f.mu.Unlock()
			if cf, ok := uintOption(req, message.ContentFormat); ok && has && uint64(cf) != want.u {
				return resp(codes.UnsupportedMediaType, fmt.Sprintf("the topic's content format (topic-content-format) is %d", want.u))
			}
		}
		payload, more, r := f.assemble(peer, req)
		if more || r != nil {
			return r
		}
		f.mu.Lock()
		_, had := f.latest[topic]
		f.mu.Unlock()
		qos := byte(0)
		if req.Type != message.NonConfirmable {
			qos = 1
		}
		// A CoAP publication is a state update: retained, so that GET and
		// late MQTT subscribers see the latest value.
		if err := f.t.Publish(topic, payload, qos, true); err != nil {
			return resp(codes.ServiceUnavailable, "publish failed: "+err.Error())
		}
		f.publishes.Add(1)
		sink.counters().publishes.Add(1)
		code := codes.Changed
		if !had {
			code = codes.Created
		}
		out := &message.Message{Code: code}
		if b1, ok := uintOption(req, message.Block1); ok {
			addUint(out, message.Block1, b1&^0x8)
		}
		return out
	case codes.GET:
		if !f.allowed(peer, topic, false) {
			return resp(codes.Forbidden, "the ACL does not allow reading this topic")
		}
		f.mu.Lock()
		val, has := f.latest[topic]
		f.mu.Unlock()
		obs, isObs := uintOption(req, message.Observe)
		if b2, ok := uintOption(req, message.Block2); ok && b2>>4 > 0 {
			isObs = false // a later block: never an observation (RFC 7959 section 2.6)
		}
		switch {
		case isObs && obs == 0:
			if !has && ps {
				return resp(codes.NotFound, "topic has no data yet (half created): publish first")
			}
			seq, ok := f.register(sink, topic, req.Token, t)
			r := f.dataContent(req, val, t)
			if !ok {
				// max-subscribers reached: the value without the Observe
				// option, which tells the client it is not subscribed.
				f.observeRefused.Add(1)
				return r
			}
			addUint(r, message.Observe, seq)
			return r
		case isObs && obs == 1:
			f.deregister(sink, topic, req.Token)
		default:
			f.deregister(sink, topic, req.Token) // a GET with the token cancels too (RFC 7641 3.6)
		}
		if !has {
			return resp(codes.NotFound, "topic has no data yet")
		}
		return f.dataContent(req, val, t)
	case codes.DELETE:
		if !f.allowed(peer, topic, true) {
			return resp(codes.Forbidden, "the ACL does not allow writing this topic")
		}
		f.clear(topic)
		return resp(codes.Deleted, "")
	}
	// FETCH and iPATCH are not defined on topic-data (draft -21): 4.05.
	return resp(codes.MethodNotAllowed, "PUT publishes, GET reads (Observe: subscribes), DELETE clears")
}

// dataContent is content with the Content-Format of topic t's data (its
// topic-content-format; none for the direct form).
func (f *Front) dataContent(req *message.Message, payload []byte, t *psTopic) *message.Message {
	r := f.content(req, payload)
	if cf, ok := f.contentFormatOf(t); ok && r.Code == codes.Content {
		addUint(r, message.ContentFormat, cf)
	}
	return r
}

// content returns a 2.05 with payload, split block-wise if it is larger
// than the block size (or than the block the client asked for).
func (f *Front) content(req *message.Message, payload []byte) *message.Message {
	szx := szxOf(f.o.BlockSize)
	num := uint32(0)
	if b2, ok := uintOption(req, message.Block2); ok {
		num = b2 >> 4
		if s := int(b2 & 7); s < szx && s < 7 {
			szx = s
		}
	}
	r := &message.Message{Code: codes.Content}
	size := 1 << (szx + 4)
	if len(payload) <= size && num == 0 {
		r.Payload = payload
		return r
	}
	start := int(num) * size
	if start >= len(payload) && (start != 0 || len(payload) != 0) {
		return resp(codes.BadOption, "block beyond the end of the value")
	}
	end := min(start+size, len(payload))
	more := uint32(0)
	if end < len(payload) {
		more = 1
	}
	r.Payload = payload[start:end]
	addUint(r, message.Block2, num<<4|more<<3|uint32(szx))
	if num == 0 {
		addUint(r, message.Size2, uint32(len(payload)))
	}
	return r
}

// assemble collects a block-wise request body (RFC 7959 Block1). It returns
// the whole payload once complete; more with a 2.31 response while blocks
// are missing; or an error response.
func (f *Front) assemble(peer net.Addr, req *message.Message) (payload []byte, more bool, r *message.Message) {
	b1, ok := uintOption(req, message.Block1)
	if !ok {
		return req.Payload, false, nil
	}
	num, m, szx := b1>>4, b1&8 != 0, int(b1&7)
	if szx == 7 {
		return nil, false, resp(codes.BadOption, "BERT blocks are for reliable transports")
	}
	size := 1 << (szx + 4)
	key := peer.String() + "|" + strings.Join(pathOf(req), "/")
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, u := range f.blocks {
		if now.After(u.expires) {
			delete(f.blocks, k)
		}
	}
	u := f.blocks[key]
	if num == 0 {
		u = &upload{}
		f.blocks[key] = u
	}
	if u == nil || num != u.next || (m && len(req.Payload) != size) {
		delete(f.blocks, key)
		return nil, false, resp(codes.RequestEntityIncomplete, "blocks out of order; start again with block 0")
	}
	u.data = append(u.data, req.Payload...)
	u.next++
	u.expires = now.Add(f.endpointLifetime())
	if len(u.data) > f.o.MaxPayload {
		delete(f.blocks, key)
		r := resp(codes.RequestEntityTooLarge, "")
		addUint(r, message.Size1, uint32(f.o.MaxPayload))
		return nil, false, r
	}
	if m {
		r := &message.Message{Code: codes.Continue}
		addUint(r, message.Block1, b1)
		return nil, true, r
	}
	delete(f.blocks, key)
	return u.data, false, nil
}

func (f *Front) endpointLifetime() time.Duration {
	return f.o.Params.WithDefaults().ExchangeLifetime
}

// szxOf returns the SZX of a block size, -1 if it is not one.
func szxOf(size int) int {
	for szx := 0; szx <= 6; szx++ {
		if 1<<(szx+4) == size {
			return szx
		}
	}
	return -1
}
