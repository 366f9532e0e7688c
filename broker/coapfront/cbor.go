package coapfront

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
)

// A minimal CBOR (RFC 8949) codec for topic properties: a map with unsigned
// integer keys whose values are unsigned integers, text strings, byte
// strings or (for expiration-date) a tag 1 number. Nothing else is accepted.

type cborValue struct {
	kind byte // 0 uint, 2 bstr, 3 tstr, 6 tagged epoch (value in u)
	u    uint64
	s    string
}

func cborHead(b []byte, major byte, v uint64) []byte {
	switch {
	case v < 24:
		return append(b, major<<5|byte(v))
	case v <= math.MaxUint8:
		return append(b, major<<5|24, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, major<<5|25), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major<<5|26), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, major<<5|27), v)
	}
}

func encodeCBORMap(m map[uint64]cborValue) []byte {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	b := cborHead(nil, 5, uint64(len(m)))
	for _, k := range keys {
		b = cborHead(b, 0, k)
		v := m[k]
		switch v.kind {
		case 0:
			b = cborHead(b, 0, v.u)
		case 2, 3:
			b = cborHead(b, v.kind, uint64(len(v.s)))
			b = append(b, v.s...)
		case 6:
			b = cborHead(b, 6, 1)
			b = cborHead(b, 0, v.u)
		}
	}
	return b
}

var errCBOR = errors.New("not a CBOR map of topic properties (integer keys; uint, text, bytes or tag-1 values)")

func cborReadHead(b []byte) (major byte, v uint64, rest []byte, err error) {
	if len(b) == 0 {
		return 0, 0, nil, errCBOR
	}
	major, info := b[0]>>5, b[0]&0x1f
	b = b[1:]
	switch {
	case info < 24:
		return major, uint64(info), b, nil
	case info == 24 && len(b) >= 1:
		return major, uint64(b[0]), b[1:], nil
	case info == 25 && len(b) >= 2:
		return major, uint64(binary.BigEndian.Uint16(b)), b[2:], nil
	case info == 26 && len(b) >= 4:
		return major, uint64(binary.BigEndian.Uint32(b)), b[4:], nil
	case info == 27 && len(b) >= 8:
		return major, binary.BigEndian.Uint64(b), b[8:], nil
	}
	return 0, 0, nil, errCBOR
}

func decodeCBORMap(b []byte) (map[uint64]cborValue, error) {
	major, n, b, err := cborReadHead(b)
	if err != nil || major != 5 || n > 64 {
		return nil, errCBOR
	}
	out := map[uint64]cborValue{}
	for i := uint64(0); i < n; i++ {
		var k uint64
		if major, k, b, err = cborReadHead(b); err != nil || major != 0 {
			return nil, fmt.Errorf("key %d: %w", i, errCBOR)
		}
		var v uint64
		if major, v, b, err = cborReadHead(b); err != nil {
			return nil, errCBOR
		}
		switch major {
		case 0:
			out[k] = cborValue{kind: 0, u: v}
		case 2, 3:
			if uint64(len(b)) < v {
				return nil, errCBOR
			}
			out[k] = cborValue{kind: major, s: string(b[:v])}
			b = b[v:]
		case 6:
			var t uint64
			if major, t, b, err = cborReadHead(b); err != nil || major != 0 || v != 1 {
				return nil, fmt.Errorf("key %d: want tag 1 with an integer: %w", k, errCBOR)
			}
			out[k] = cborValue{kind: 6, u: t}
		default:
			return nil, fmt.Errorf("key %d: unsupported value type: %w", k, errCBOR)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("trailing bytes: %w", errCBOR)
	}
	return out, nil
}
