package coapfront

import (
	"errors"
	"fmt"
	"math"

	"github.com/fxamacker/cbor/v2"
)

// Topic properties are CBOR (RFC 8949) maps with unsigned integer keys
// (draft-ietf-core-coap-pubsub-21 section 6), coded with
// github.com/fxamacker/cbor/v2. A property value is an unsigned integer, a
// text string, a byte string or, for expiration-date, tag 1 (epoch-based
// date/time) around an integer or a float; values of any other CBOR type
// are refused, since no property has one.

// cborValue is one property value.
type cborValue struct {
	kind byte    // 0 uint, 2 bstr, 3 tstr, 6 tag 1 (epoch seconds)
	u    uint64  // kind 0; kind 6 with num 0
	i    int64   // kind 6 with num 1 (a negative integer)
	f    float64 // kind 6 with num 7 (a float; never NaN or infinite)
	num  byte    // kind 6: the CBOR major type of the tag's content (0, 1 or 7)
	s    string  // kinds 2 and 3
}

// Decoding limits: a client's bytes never make the decoder allocate more
// than this many map pairs or array elements, nor nest deeper.
const (
	cborMaxPairs    = 64 // no property map has more than 9 known keys
	cborMaxElements = 64 // a FETCH names at most this many properties
	cborMaxNesting  = 4  // the library's minimum; a property map needs 2
)

// errCBOR marks a payload that is not a valid property map or key array.
var errCBOR = errors.New("not a CBOR map of topic properties (integer keys; uint, text, bytes or tag-1 values)")

// cborCodec holds the library's encoding and decoding modes (immutable,
// safe for concurrent use).
type cborCodec struct {
	enc cbor.EncMode
	dec cbor.DecMode
}

// newCBORCodec builds the modes: deterministic encoding (RFC 8949 section
// 4.2: sorted keys, shortest forms); decoding that refuses duplicate keys,
// NaN and infinities and bounds allocation and nesting.
func newCBORCodec() (*cborCodec, error) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		return nil, fmt.Errorf("cbor encoding mode: %w", err)
	}
	dec, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:  cborMaxNesting,
		MaxArrayElements: cborMaxElements,
		MaxMapPairs:      cborMaxPairs,
		NaN:              cbor.NaNDecodeForbidden,
		Inf:              cbor.InfDecodeForbidden,
	}.DecMode()
	if err != nil {
		return nil, fmt.Errorf("cbor decoding mode: %w", err)
	}
	return &cborCodec{enc: enc, dec: dec}, nil
}

// encodeMap encodes a property map (deterministically).
func (c *cborCodec) encodeMap(m map[uint64]cborValue) ([]byte, error) {
	out := make(map[uint64]any, len(m))
	for k, v := range m {
		switch v.kind {
		case 0:
			out[k] = v.u
		case 2:
			out[k] = []byte(v.s)
		case 3:
			out[k] = v.s
		case 6:
			var content any = v.u
			switch v.num {
			case 1:
				content = v.i
			case 7:
				content = v.f
			}
			out[k] = cbor.Tag{Number: 1, Content: content}
		default:
			return nil, fmt.Errorf("encode topic property %d: unknown kind %d", k, v.kind)
		}
	}
	b, err := c.enc.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode topic properties: %w", err)
	}
	return b, nil
}

// decodeMap decodes a property map. Any CBOR map with unsigned integer keys
// whose values have the kinds of cborValue is accepted (unknown keys are
// checkProps's business).
func (c *cborCodec) decodeMap(b []byte) (map[uint64]cborValue, error) {
	if len(b) == 0 || b[0]>>5 != 5 {
		return nil, fmt.Errorf("%w: not a map", errCBOR)
	}
	// Keys decode as any (a null key would silently become 0 in a
	// map[uint64]); values stay raw until their type is known.
	var raw map[any]cbor.RawMessage
	if err := c.dec.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %w", errCBOR, err)
	}
	out := make(map[uint64]cborValue, len(raw))
	for key, r := range raw {
		k, ok := key.(uint64)
		if !ok {
			return nil, fmt.Errorf("%w: key %v is not an unsigned integer", errCBOR, key)
		}
		v, err := c.decodeValue(r)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", errCBOR, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// decodeValue decodes one property value (r is one well-formed data item).
func (c *cborCodec) decodeValue(r cbor.RawMessage) (cborValue, error) {
	if len(r) == 0 {
		return cborValue{}, errors.New("empty value")
	}
	switch r[0] >> 5 {
	case 0:
		var u uint64
		if err := c.dec.Unmarshal(r, &u); err != nil {
			return cborValue{}, fmt.Errorf("unsigned integer: %w", err)
		}
		return cborValue{kind: 0, u: u}, nil
	case 2:
		var s []byte
		if err := c.dec.Unmarshal(r, &s); err != nil {
			return cborValue{}, fmt.Errorf("byte string: %w", err)
		}
		return cborValue{kind: 2, s: string(s)}, nil
	case 3:
		var s string
		if err := c.dec.Unmarshal(r, &s); err != nil {
			return cborValue{}, fmt.Errorf("text string: %w", err)
		}
		return cborValue{kind: 3, s: s}, nil
	case 6:
		var t cbor.RawTag
		if err := c.dec.Unmarshal(r, &t); err != nil {
			return cborValue{}, fmt.Errorf("tag: %w", err)
		}
		if t.Number != 1 || len(t.Content) == 0 {
			return cborValue{}, fmt.Errorf("tag %d: only tag 1 (epoch-based date/time) is a property value", t.Number)
		}
		return c.decodeEpoch(t.Content)
	}
	return cborValue{}, fmt.Errorf("unsupported CBOR major type %d", r[0]>>5)
}

// decodeEpoch decodes the content of tag 1: an integer or a float
// (RFC 8949 section 3.4.2), as seconds since the epoch.
func (c *cborCodec) decodeEpoch(r cbor.RawMessage) (cborValue, error) {
	switch major, info := r[0]>>5, r[0]&0x1f; {
	case major == 0:
		var u uint64
		if err := c.dec.Unmarshal(r, &u); err != nil {
			return cborValue{}, fmt.Errorf("tag 1: %w", err)
		}
		return cborValue{kind: 6, num: 0, u: u}, nil
	case major == 1:
		var i int64
		if err := c.dec.Unmarshal(r, &i); err != nil {
			return cborValue{}, fmt.Errorf("tag 1: negative integer out of range: %w", err)
		}
		return cborValue{kind: 6, num: 1, i: i}, nil
	case major == 7 && info >= 25 && info <= 27:
		var f float64
		if err := c.dec.Unmarshal(r, &f); err != nil {
			return cborValue{}, fmt.Errorf("tag 1: %w", err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return cborValue{}, errors.New("tag 1: not a finite number")
		}
		return cborValue{kind: 6, num: 7, f: f}, nil
	}
	return cborValue{}, errors.New("tag 1 must enclose an integer or a float")
}

// decodeKeys decodes a CBOR array of unsigned integers (a FETCH on a topic
// configuration names the properties it wants).
func (c *cborCodec) decodeKeys(b []byte) ([]uint64, error) {
	if len(b) == 0 || b[0]>>5 != 4 {
		return nil, fmt.Errorf("want a CBOR array of property numbers: %w", errCBOR)
	}
	var raw []cbor.RawMessage
	if err := c.dec.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("want a CBOR array of property numbers: %w: %w", errCBOR, err)
	}
	keys := make([]uint64, 0, len(raw))
	for i, r := range raw {
		var k uint64
		if len(r) == 0 || r[0]>>5 != 0 {
			return nil, fmt.Errorf("element %d: want an unsigned integer: %w", i, errCBOR)
		}
		if err := c.dec.Unmarshal(r, &k); err != nil {
			return nil, fmt.Errorf("element %d: %w: %w", i, errCBOR, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
