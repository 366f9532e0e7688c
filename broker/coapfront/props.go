package coapfront

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// Topic properties of draft-ietf-core-coap-pubsub-21 (CBOR integer keys)
// and what the front does with each:
//
//	0 topic-name            the MQTT topic; required, unique, immutable
//	1 topic-data            set by the front (/ps/data/<id>), immutable
//	2 resource-type         "core.ps.data"; required, immutable
//	3 topic-content-format  a PUT with another Content-Format gets 4.15
//	4 topic-type            stored
//	5 expiration-date       tag 1 epoch seconds: the topic is deleted then
//	                        (observers get 4.04); in the past: 4.00
//	6 max-subscribers       an Observe registration beyond it gets the value
//	                        without the Observe option (not subscribed)
//	7 observer-check        seconds between CON notifications of the
//	                        topic's observers (Options.ObserverCheck else)
//	8 initialize            published as the first value
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
		return "tag 1 (epoch seconds)"
	}
}

// checkProps validates the types of known properties and refuses unknown
// ones and an expiration-date that has passed.
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
	if e, ok := props[propExpiration]; ok && !expiry(e).After(now) {
		return fmt.Errorf("expiration-date (5) %d is not in the future", e.u)
	}
	return nil
}

func expiry(v cborValue) time.Time {
	return time.Unix(int64(min(v.u, math.MaxInt64/2)), 0)
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
	delete(f.topics, t.id)
	delete(f.byName, t.name)
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

// decodeCBORKeys decodes a CBOR array of unsigned integers (a FETCH on a
// topic configuration names the properties it wants).
func decodeCBORKeys(b []byte) ([]uint64, error) {
	major, n, b, err := cborReadHead(b)
	if err != nil || major != 4 || n > 64 {
		return nil, fmt.Errorf("want a CBOR array of property numbers: %w", errCBOR)
	}
	out := make([]uint64, 0, n)
	for i := uint64(0); i < n; i++ {
		var k uint64
		if major, k, b, err = cborReadHead(b); err != nil || major != 0 {
			return nil, fmt.Errorf("element %d: want an unsigned integer: %w", i, errCBOR)
		}
		out = append(out, k)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("trailing bytes: %w", errCBOR)
	}
	return out, nil
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

// fetchCollection answers FETCH /ps: the topics whose properties equal
// every property of the CBOR map in the request.
func (f *Front) fetchCollection(peer net.Addr, req *message.Message) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || int(cf) != f.o.ContentFormat {
		return resp(codes.UnsupportedMediaType, fmt.Sprintf("want Content-Format %d (application/core-pubsub+cbor)", f.o.ContentFormat))
	}
	filter, err := decodeCBORMap(req.Payload)
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
// (topic-name, topic-data, resource-type) may be repeated, not changed.
func (f *Front) updateConfig(t *psTopic, req *message.Message, replace bool) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || int(cf) != f.o.ContentFormat {
		return resp(codes.UnsupportedMediaType, fmt.Sprintf("want Content-Format %d (application/core-pubsub+cbor)", f.o.ContentFormat))
	}
	upd, err := decodeCBORMap(req.Payload)
	if err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	if err := checkProps(upd, time.Now()); err != nil {
		return resp(codes.BadRequest, err.Error())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics[t.id] != t {
		return resp(codes.NotFound, "no such topic")
	}
	for _, k := range []uint64{propName, propData, propResourceType} {
		if v, ok := upd[k]; ok && v != t.props[k] {
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
	t.props = next
	f.scheduleExpiryLocked(t)
	r := &message.Message{Code: codes.Changed, Payload: encodeCBORMap(t.props)}
	addUint(r, message.ContentFormat, uint32(f.o.ContentFormat))
	return r
}

// fetchConfig answers FETCH /ps/<id> with the properties named by the CBOR
// array in the request.
func (f *Front) fetchConfig(t *psTopic, req *message.Message) *message.Message {
	if cf, ok := uintOption(req, message.ContentFormat); !ok || cf != contentFormatCBOR {
		return resp(codes.UnsupportedMediaType, "want Content-Format 60 (application/cbor): an array of property numbers")
	}
	keys, err := decodeCBORKeys(req.Payload)
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
	r := &message.Message{Code: codes.Content, Payload: encodeCBORMap(part)}
	addUint(r, message.ContentFormat, uint32(f.o.ContentFormat))
	return r
}
