package coapfront

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapmsg"
)

// Topic properties of draft-ietf-core-coap-pubsub-21 (CBOR integer keys)
// and what the front does with each:
//
//	0 topic-name            the MQTT topic; required, unique, immutable
//	1 topic-data            the client's path if given (free and valid,
//	                        else 4.00/4.03), else /ps/data/<id>; immutable
//	2 resource-type         "core.ps.data"; required, immutable
//	3 topic-content-format  a PUT with another Content-Format gets 4.15;
//	                        GET responses and notifications carry it
//	4 topic-type            stored
//	5 expiration-date       tag 1 epoch seconds (integer or float): the
//	                        topic is deleted then (observers get 4.04); not
//	                        in the future: 4.00
//	6 max-subscribers       an Observe registration beyond it gets the value
//	                        without the Observe option (not subscribed);
//	                        lowering it removes the newest observers with a
//	                        final 4.04
//	7 observer-check        seconds (> 0) between CON notifications of the
//	                        topic's observers (Options.ObserverCheck else)
//	8 initialize            published as the first value; needs 3
const (
	propName         = 0
	propData         = 1
	propResourceType = 2
	propContentFmt   = 3
	propTopicType    = 4
	propExpiration   = 5
	propMaxSubs      = 6
	propObsCheck     = 7
	propInitialize   = 8
)

// propKind is the CBOR kind a known property must have; ok is false for
// unknown properties.
func propKind(k uint64) (kind byte, ok bool) {
	switch k {
	case propName, propData, propResourceType, propTopicType:
		return 3, true
	case propContentFmt, propMaxSubs, propObsCheck:
		return 0, true
	case propExpiration:
		return 6, true
	case propInitialize:
		return 2, true
	}
	return 0, false
}

func kindName(k byte) string {
	switch k {
	case 0:
		return "an unsigned integer"
	case 2:
		return "a byte string"
	case 3:
		return "a text string"
	default:
		return "tag 1 (epoch seconds, an integer or a float)"
	}
}

// checkProps validates the types of known properties and refuses unknown
// ones, an observer-check of 0 and an expiration-date that has passed.
func checkProps(props map[uint64]cborValue, now time.Time) error {
	keys := make([]uint64, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		want, ok := propKind(k)
		if !ok {
			return fmt.Errorf("unknown topic property %d", k)
		}
		if props[k].kind != want {
			return fmt.Errorf("topic property %d must be %s", k, kindName(want))
		}
	}
	if v, ok := props[propContentFmt]; ok && v.u > math.MaxUint16 {
		return fmt.Errorf("topic-content-format (%d) %d is not a Content-Format number (0-65535)", propContentFmt, v.u)
	}
	if v, ok := props[propObsCheck]; ok && v.u == 0 {
		return fmt.Errorf("observer-check (%d) must be greater than 0", propObsCheck)
	}
	if e, ok := props[propExpiration]; ok && !expiry(e).After(now) {
		return fmt.Errorf("expiration-date (%d) %s is not in the future", propExpiration, epochString(e))
	}
	return nil
}

// checkComplete checks a topic's whole configuration (after creation or an
// update): initialize needs topic-content-format (draft section 2.2.1).
func checkComplete(props map[uint64]cborValue) error {
	_, init := props[propInitialize]
	_, cf := props[propContentFmt]
	if init && !cf {
		return fmt.Errorf("initialize (%d) needs topic-content-format (%d)", propInitialize, propContentFmt)
	}
	return nil
}

// epochString formats the content of an expiration-date.
func epochString(v cborValue) string {
	switch v.num {
	case 1:
		return fmt.Sprint(v.i)
	case 7:
		return fmt.Sprint(v.f)
	}
	return fmt.Sprint(v.u)
}

// maxEpoch bounds expiration dates (about 146 billion years): beyond it a
// date is taken as that far, so that time arithmetic cannot overflow.
const maxEpoch = math.MaxInt64 / 2 / int64(time.Second)

// expiry returns the instant of an expiration-date (tag 1: integer or
// fractional seconds since the epoch).
func expiry(v cborValue) time.Time {
	switch v.num {
	case 1:
		return time.Unix(max(v.i, -maxEpoch), 0)
	case 7:
		if v.f >= float64(maxEpoch) {
			return time.Unix(maxEpoch, 0)
		}
		if v.f <= -float64(maxEpoch) {
			return time.Unix(-maxEpoch, 0)
		}
		sec := math.Floor(v.f)
		return time.Unix(int64(sec), int64((v.f-sec)*1e9))
	}
	return time.Unix(int64(min(v.u, uint64(maxEpoch))), 0)
}

// scheduleExpiryLocked (re)arms t's expiration timer. Called with f.mu held.
func (f *Front) scheduleExpiryLocked(t *psTopic) {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	e, ok := t.props[propExpiration]
	if !ok {
		return
	}
	t.timer = time.AfterFunc(time.Until(expiry(e)), func() { f.expire(t) })
}

// expire deletes topic t when its expiration-date has come (as DELETE on
// its configuration: observers get 4.04).
func (f *Front) expire(t *psTopic) {
	f.mu.Lock()
	if f.closed || f.topics[t.id] != t {
		f.mu.Unlock()
		return
	}
	f.wg.Add(1)
	defer f.wg.Done()
	f.deleteTopicLocked(t)
	f.mu.Unlock()
	f.expired.Add(1)
	f.log.Debug("coap: topic expired", "topic", t.name, "id", t.id)
	f.clear(t.name)
}

// deleteTopicLocked removes t (and stops its timer). Called with f.mu held.
func (f *Front) deleteTopicLocked(t *psTopic) {
	if t.timer != nil {
		t.timer.Stop()
	}
	delete(f.topics, t.id)
	delete(f.byName, t.name)
	if f.byData[t.dataPath] == t {
		delete(f.byData, t.dataPath)
	}
}

// limitsLocked returns the observation limits of topic t (nil: the direct form,
// no limits): max-subscribers (-1: none) and the observer check.
func (f *Front) limitsLocked(t *psTopic) (maxSubs int, check time.Duration) {
	maxSubs, check = -1, f.o.ObserverCheck
	if t == nil {
		return maxSubs, check
	}
	if v, ok := t.props[propMaxSubs]; ok {
		maxSubs = int(min(v.u, math.MaxInt32))
	}
	if v, ok := t.props[propObsCheck]; ok && v.u > 0 {
		check = time.Duration(min(v.u, uint64(math.MaxInt64/int64(time.Second)))) * time.Second
	}
	return maxSubs, check
}

// FETCH and iPATCH (RFC 8132, codes 0.05 and 0.07); go-coap v3.5.4 names
// neither.
const (
	codeFETCH  codes.Code = 5
	codeIPATCH codes.Code = 7
)

// contentFormatCBOR is application/cbor (RFC 7049), the format of a FETCH
// on a topic configuration.
const contentFormatCBOR = 60

// propsResponse is a response carrying a property map in
// application/core-pubsub+cbor (5.00 if it cannot be encoded).
func (f *Front) propsResponse(code codes.Code, props map[uint64]cborValue) *message.Message {
	b, err := f.cbor.encodeMap(props)
	if err != nil {
		f.log.Error("coap: encode topic properties", "error", err)
		return resp(codes.InternalServerError, "cannot encode the topic properties")
	}
	r := &message.Message{Code: code, Payload: b}
	addUint(r, message.ContentFormat, uint32(f.o.ContentFormat))
	return r
}

// fetchCollection answers FETCH /ps: the topics whose properties equal
// every property of the CBOR map in the request.
func (f *Front) fetchCollection(peer net.Addr, req *message.Message) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || int(cf) != f.o.ContentFormat {
		return resp(codes.UnsupportedMediaType, fmt.Sprintf("want Content-Format %d (application/core-pubsub+cbor)", f.o.ContentFormat))
	}
	filter, err := f.cbor.decodeMap(req.Payload)
	if err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	var out []string
	f.mu.Lock()
	for _, t := range f.topics {
		match := true
		for k, v := range filter {
			if t.props[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, fmt.Sprintf(`</ps/%s>;rt=core.ps.conf`, t.id))
		}
	}
	f.mu.Unlock()
	sort.Strings(out)
	r := resp(codes.Content, strings.Join(out, ","))
	addUint(r, message.ContentFormat, uint32(message.AppLinkFormat))
	return r
}

// updateConfig serves POST (replace: omitted mutable properties are
// removed) and iPATCH (merge) on /ps/<id>. The immutable properties
// (topic-name, topic-data, resource-type) may be repeated, not changed. A
// lower max-subscribers than the topic's observers removes the newest of
// them, each with a final 4.04 (draft section 3.2.3).
func (f *Front) updateConfig(t *psTopic, req *message.Message, replace bool) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || int(cf) != f.o.ContentFormat {
		return resp(codes.UnsupportedMediaType, fmt.Sprintf("want Content-Format %d (application/core-pubsub+cbor)", f.o.ContentFormat))
	}
	upd, err := f.cbor.decodeMap(req.Payload)
	if err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	if err := checkProps(upd, time.Now()); err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	f.mu.Lock()
	if f.topics[t.id] != t {
		f.mu.Unlock()
		return resp(codes.NotFound, "no such topic")
	}
	for _, k := range []uint64{propName, propData, propResourceType} {
		if v, ok := upd[k]; ok && v != t.props[k] {
			f.mu.Unlock()
			return resp(codes.BadRequest, fmt.Sprintf("topic property %d is immutable", k))
		}
	}
	next := map[uint64]cborValue{}
	for k, v := range t.props {
		if !replace || k == propName || k == propData || k == propResourceType {
			next[k] = v
		}
	}
	for k, v := range upd {
		next[k] = v
	}
	if err := checkComplete(next); err != nil {
		f.mu.Unlock()
		return resp(codes.BadRequest, err.Error())
	}
	t.props = next
	f.scheduleExpiryLocked(t)
	dropped := f.trimObserversLocked(t)
	props := maps.Clone(t.props)
	f.mu.Unlock()
	for _, o := range dropped {
		o.notify(f, codes.NotFound, nil)
	}
	return f.propsResponse(codes.Changed, props)
}

// trimObserversLocked removes the observers of t's topic-data resource
// beyond its max-subscribers, the newest registrations first, and returns
// them (for their final 4.04). Called with f.mu held.
func (f *Front) trimObserversLocked(t *psTopic) []*observer {
	maxSubs, _ := f.limitsLocked(t)
	if maxSubs < 0 {
		return nil
	}
	var obs []*observer
	for o := range f.observers[t.name] {
		if o.via == t {
			obs = append(obs, o)
		}
	}
	if len(obs) <= maxSubs {
		return nil
	}
	sort.Slice(obs, func(i, j int) bool { return obs[i].reg < obs[j].reg })
	dropped := obs[maxSubs:]
	for _, o := range dropped {
		f.removeLocked(o)
	}
	return dropped
}

// fetchConfig answers FETCH /ps/<id> with the properties named by the CBOR
// array in the request.
func (f *Front) fetchConfig(t *psTopic, req *message.Message) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || cf != contentFormatCBOR {
		return resp(codes.UnsupportedMediaType, "want Content-Format 60 (application/cbor): an array of property numbers")
	}
	keys, err := f.cbor.decodeKeys(req.Payload)
	if err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	part := map[uint64]cborValue{}
	f.mu.Lock()
	for _, k := range keys {
		if v, ok := t.props[k]; ok {
			part[k] = v
		}
	}
	f.mu.Unlock()
	return f.propsResponse(codes.Content, part)
}

// contentFormatOf returns the topic-content-format of topic t (nil: the
// direct form, which has none).
func (f *Front) contentFormatOf(t *psTopic) (uint32, bool) {
	if t == nil {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := t.props[propContentFmt]
	if !ok || v.u > math.MaxUint16 { // refused by checkProps
		return 0, false
	}
	return uint32(v.u), true
}

// sortedTopicsLocked returns the topics in the order of their ids (stable
// listings). Called with f.mu held.
func (f *Front) sortedTopicsLocked() []*psTopic {
	out := make([]*psTopic, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// newTopicIDLocked returns a fresh topic id whose default topic-data path
// (ps/data/<id>) no client has chosen. Called with f.mu held.
func (f *Front) newTopicIDLocked() string {
	for {
		id := hex.EncodeToString([]byte(coapmsg.NewToken())[:4])
		if f.topics[id] == nil && f.byData["ps/data/"+id] == nil {
			return id
		}
	}
}

// Limits of a client-chosen topic-data path.
const (
	maxDataSegments = 16
	maxSegmentLen   = 255 // a Uri-Path option's longest value
)

// dataPathOf checks the topic-data URI a client gave at creation and
// returns its path without the leading "/". The front hosts every
// topic-data resource itself, so the URI must be an absolute path of
// unreserved characters (RFC 3986 pchar without percent-encoding), outside
// the front's own resources: /.well-known/…, /ps and /ps/<id> (topic
// collection and configurations) and /t/… (the direct form).
func dataPathOf(uri string) (string, error) {
	if !strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") {
		return "", fmt.Errorf("topic-data (%d) %q: want an absolute path on this broker such as /sensors/room1 (topic-data hosted elsewhere is not supported)", propData, uri)
	}
	segs := strings.Split(uri[1:], "/")
	if len(segs) > maxDataSegments {
		return "", fmt.Errorf("topic-data (%d) %q: more than %d path segments", propData, uri, maxDataSegments)
	}
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." || len(seg) > maxSegmentLen {
			return "", fmt.Errorf("topic-data (%d) %q: empty, dot or over-long path segment", propData, uri)
		}
		for _, c := range []byte(seg) {
			if !isPathChar(c) {
				return "", fmt.Errorf("topic-data (%d) %q: character %q not allowed (no query, fragment or percent-encoding)", propData, uri, c)
			}
		}
	}
	switch {
	case segs[0] == ".well-known", segs[0] == "t",
		segs[0] == "ps" && len(segs) <= 2:
		return "", fmt.Errorf("topic-data (%d) %q: reserved for the broker's own resources (/.well-known, /ps, /ps/<id>, /t/)", propData, uri)
	}
	return strings.Join(segs, "/"), nil
}

// isPathChar reports whether c is an RFC 3986 pchar other than "%".
func isPathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}
