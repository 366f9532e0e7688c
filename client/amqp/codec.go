package amqp

// A minimal AMQP 1.0 type-system codec (AMQP 1.0 part 1), enough for the
// pipelined connection start (pipeline.go): it encodes the performatives
// of the first flight and decodes performatives well enough to compare
// ours with go-amqp's and to read the broker's disposition. It is not a
// general AMQP codec: arrays, decimals, floats and chars are not decoded.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Type codes of the AMQP 1.0 type system used here.
const (
	codeDescribed = 0x00
	codeNull      = 0x40
	codeTrue      = 0x41
	codeFalse     = 0x42
	codeUint0     = 0x43
	codeUlong0    = 0x44
	codeList0     = 0x45
	codeUbyte     = 0x50
	codeSmallUint = 0x52
	codeSmallUlng = 0x53
	codeSmallInt  = 0x54
	codeSmallLong = 0x55
	codeBool      = 0x56
	codeByte      = 0x51
	codeUshort    = 0x60
	codeShort     = 0x61
	codeUint      = 0x70
	codeInt       = 0x71
	codeUlong     = 0x80
	codeLong      = 0x81
	codeTimestamp = 0x83
	codeUUID      = 0x98
	codeVbin8     = 0xa0
	codeStr8      = 0xa1
	codeSym8      = 0xa3
	codeVbin32    = 0xb0
	codeStr32     = 0xb1
	codeSym32     = 0xb3
	codeList8     = 0xc0
	codeMap8      = 0xc1
	codeList32    = 0xd0
	codeMap32     = 0xd1
)

// Descriptor codes (AMQP 1.0 parts 2, 3 and 5).
const (
	descOpen        = 0x10
	descBegin       = 0x11
	descAttach      = 0x12
	descFlow        = 0x13
	descTransfer    = 0x14
	descDisposition = 0x15
	descError       = 0x1d
	descAccepted    = 0x24
	descRejected    = 0x25
	descReleased    = 0x26
	descModified    = 0x27
	descSource      = 0x28
	descTarget      = 0x29
	descSASLInit    = 0x41
	descProperties  = 0x73
	descData        = 0x75
)

// Frame types (AMQP 1.0 part 2 section 2.3, part 5 section 5.3.3).
const (
	frameAMQP = 0x00
	frameSASL = 0x01
)

// Value types of the codec: a symbol, and a described value.
type (
	symbol    string
	described struct {
		code  uint64
		value any
	}
	// list is an AMQP list; a performative is a described list.
	list []any
)

// rawEncoded is a value already encoded, appended as it is.
type rawEncoded []byte

// null is the AMQP null in a list under construction.
var null any

// encoder appends AMQP encodings of Go values: nil (null), bool, uint8
// (ubyte), uint16 (ushort), uint32 (uint), uint64 (ulong), string, symbol,
// []byte (binary), list and described.
type encoder struct{ b []byte }

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case rawEncoded: // an encoding made elsewhere (tests: types encoder lacks)
		e.b = append(e.b, v...)
		return nil
	case nil:
		e.b = append(e.b, codeNull)
	case bool:
		if v {
			e.b = append(e.b, codeTrue)
		} else {
			e.b = append(e.b, codeFalse)
		}
	case uint8:
		e.b = append(e.b, codeUbyte, v)
	case uint16:
		e.b = append(e.b, codeUshort)
		e.b = binary.BigEndian.AppendUint16(e.b, v)
	case uint32:
		switch {
		case v == 0:
			e.b = append(e.b, codeUint0)
		case v < 256:
			e.b = append(e.b, codeSmallUint, byte(v))
		default:
			e.b = append(e.b, codeUint)
			e.b = binary.BigEndian.AppendUint32(e.b, v)
		}
	case uint64:
		switch {
		case v == 0:
			e.b = append(e.b, codeUlong0)
		case v < 256:
			e.b = append(e.b, codeSmallUlng, byte(v))
		default:
			e.b = append(e.b, codeUlong)
			e.b = binary.BigEndian.AppendUint64(e.b, v)
		}
	case string:
		e.variable(codeStr8, codeStr32, []byte(v))
	case symbol:
		e.variable(codeSym8, codeSym32, []byte(v))
	case []byte:
		e.variable(codeVbin8, codeVbin32, v)
	case list:
		return e.list(v)
	case described:
		e.b = append(e.b, codeDescribed)
		if err := e.value(v.code); err != nil {
			return err
		}
		return e.value(v.value)
	default:
		return fmt.Errorf("amqp codec: cannot encode %T", v)
	}
	return nil
}

func (e *encoder) variable(small, large byte, b []byte) {
	if len(b) < 256 {
		e.b = append(e.b, small, byte(len(b)))
	} else {
		e.b = append(e.b, large)
		e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(b)))
	}
	e.b = append(e.b, b...)
}

// list encodes l as list32 (what most encoders write for performatives),
// after dropping trailing nulls; an empty list is list0.
func (e *encoder) list(l list) error {
	l = trimNulls(l)
	if len(l) == 0 {
		e.b = append(e.b, codeList0)
		return nil
	}
	e.b = append(e.b, codeList32, 0, 0, 0, 0)
	at := len(e.b)
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(l)))
	for _, v := range l {
		if err := e.value(v); err != nil {
			return err
		}
	}
	binary.BigEndian.PutUint32(e.b[at-4:], uint32(len(e.b)-at))
	return nil
}

func trimNulls(l list) list {
	for len(l) > 0 && l[len(l)-1] == nil {
		l = l[:len(l)-1]
	}
	return l
}

// frame returns one AMQP frame (part 2 section 2.3.1): size, data offset 2,
// type, channel, the performative and the payload.
func frame(typ byte, channel uint16, performative described, payload []byte) ([]byte, error) {
	e := encoder{b: []byte{0, 0, 0, 0, 2, typ, byte(channel >> 8), byte(channel)}}
	if err := e.value(performative); err != nil {
		return nil, err
	}
	e.b = append(e.b, payload...)
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)))
	return e.b, nil
}

// protoHeader is the protocol header of protocol id 0 (AMQP) or 3 (SASL).
func protoHeader(id byte) []byte { return []byte{'A', 'M', 'Q', 'P', id, 1, 0, 0} }

var errShort = errors.New("amqp codec: truncated value")

// maxDepth bounds the nesting of compound and described values that decode
// accepts. A performative nests a few levels (a disposition's rejected
// state holds an error holding an info map); without a bound, a frame of
// nested descriptors (one byte each) recursed once per byte: the 1 MiB a
// broker's frame may have (maxHeld) took 512 MB of goroutine stack.
const maxDepth = 64

// decode decodes one value at the start of b and returns it with the
// number of bytes it took. Lists become list, maps []any of alternating
// keys and values, described values described; integers keep their width
// (uint32 for every uint encoding, and so on). Malformed input (truncated,
// a size or element count the input cannot hold, a map of an odd number of
// elements, elements that do not fill the compound's size, nesting deeper
// than maxDepth) is an error, found before anything is allocated for it.
func decode(b []byte) (any, int, error) { return decodeAt(b, 0) }

func decodeAt(b []byte, depth int) (any, int, error) {
	if len(b) == 0 {
		return nil, 0, errShort
	}
	if depth >= maxDepth {
		return nil, 0, fmt.Errorf("amqp codec: values nested deeper than %d levels", maxDepth)
	}
	need := func(n int) error {
		if len(b) < 1+n {
			return errShort
		}
		return nil
	}
	c := b[0]
	switch c {
	case codeDescribed:
		d, n, err := decodeAt(b[1:], depth+1)
		if err != nil {
			return nil, 0, err
		}
		var code uint64
		switch d := d.(type) {
		case uint64:
			code = d
		case symbol:
			code = ^uint64(0) // symbolic descriptors are not used here
		default:
			return nil, 0, fmt.Errorf("amqp codec: descriptor of type %T", d)
		}
		v, m, err := decodeAt(b[1+n:], depth+1)
		if err != nil {
			return nil, 0, err
		}
		return described{code: code, value: v}, 1 + n + m, nil
	case codeNull:
		return nil, 1, nil
	case codeTrue:
		return true, 1, nil
	case codeFalse:
		return false, 1, nil
	case codeUint0:
		return uint32(0), 1, nil
	case codeUlong0:
		return uint64(0), 1, nil
	case codeList0:
		return list{}, 1, nil
	case codeBool, codeUbyte, codeSmallUint, codeSmallUlng, codeByte, codeSmallInt, codeSmallLong:
		if err := need(1); err != nil {
			return nil, 0, err
		}
		switch c {
		case codeBool:
			return b[1] != 0, 2, nil
		case codeUbyte:
			return b[1], 2, nil
		case codeSmallUint:
			return uint32(b[1]), 2, nil
		case codeSmallUlng:
			return uint64(b[1]), 2, nil
		case codeByte:
			return int8(b[1]), 2, nil
		case codeSmallInt:
			return int32(int8(b[1])), 2, nil
		default:
			return int64(int8(b[1])), 2, nil
		}
	case codeUshort, codeShort:
		if err := need(2); err != nil {
			return nil, 0, err
		}
		v := binary.BigEndian.Uint16(b[1:])
		if c == codeShort {
			return int16(v), 3, nil
		}
		return v, 3, nil
	case codeUint, codeInt:
		if err := need(4); err != nil {
			return nil, 0, err
		}
		v := binary.BigEndian.Uint32(b[1:])
		if c == codeInt {
			return int32(v), 5, nil
		}
		return v, 5, nil
	case codeUlong, codeLong, codeTimestamp:
		if err := need(8); err != nil {
			return nil, 0, err
		}
		v := binary.BigEndian.Uint64(b[1:])
		if c == codeUlong {
			return v, 9, nil
		}
		return int64(v), 9, nil
	case codeUUID:
		if err := need(16); err != nil {
			return nil, 0, err
		}
		return append([]byte(nil), b[1:17]...), 17, nil
	case codeVbin8, codeStr8, codeSym8, codeVbin32, codeStr32, codeSym32:
		// Lengths stay uint64 until checked against the input: as an int
		// a 32-bit length is negative on 32-bit platforms.
		var n uint64
		var h int
		if c == codeVbin8 || c == codeStr8 || c == codeSym8 {
			if err := need(1); err != nil {
				return nil, 0, err
			}
			n, h = uint64(b[1]), 2
		} else {
			if err := need(4); err != nil {
				return nil, 0, err
			}
			n, h = uint64(binary.BigEndian.Uint32(b[1:])), 5
		}
		if n > uint64(len(b)-h) {
			return nil, 0, fmt.Errorf("amqp codec: type %#02x of %d bytes in the %d left: %w", c, n, len(b)-h, errShort)
		}
		end := h + int(n)
		raw := b[h:end]
		switch c {
		case codeStr8, codeStr32:
			return string(raw), end, nil
		case codeSym8, codeSym32:
			return symbol(raw), end, nil
		}
		return append([]byte(nil), raw...), end, nil
	case codeList8, codeMap8, codeList32, codeMap32:
		// size counts the bytes after the size field (the count and the
		// elements); every element takes at least one byte, so a count
		// beyond the size is refused before the list is allocated.
		var size, count uint64
		var h, w int // header length, width of the size and count fields
		if c == codeList8 || c == codeMap8 {
			if err := need(2); err != nil {
				return nil, 0, err
			}
			size, count, h, w = uint64(b[1]), uint64(b[2]), 3, 1
		} else {
			if err := need(8); err != nil {
				return nil, 0, err
			}
			size, count, h, w = uint64(binary.BigEndian.Uint32(b[1:])), uint64(binary.BigEndian.Uint32(b[5:])), 9, 4
		}
		if size < uint64(w) {
			return nil, 0, fmt.Errorf("amqp codec: compound %#02x of size %d has no room for its count", c, size)
		}
		if size > uint64(len(b)-1-w) {
			return nil, 0, fmt.Errorf("amqp codec: compound %#02x of %d bytes in the %d left: %w", c, size, len(b)-1-w, errShort)
		}
		end := 1 + w + int(size)
		if count > uint64(end-h) {
			return nil, 0, fmt.Errorf("amqp codec: compound %#02x of %d elements in %d bytes", c, count, end-h)
		}
		if (c == codeMap8 || c == codeMap32) && count%2 != 0 {
			return nil, 0, fmt.Errorf("amqp codec: map of %d elements (not key-value pairs)", count)
		}
		items := make(list, 0, min(count, 64))
		at := h
		for i := uint64(0); i < count; i++ {
			v, n, err := decodeAt(b[at:end], depth+1)
			if err != nil {
				return nil, 0, err
			}
			items = append(items, v)
			at += n
		}
		if at != end {
			return nil, 0, fmt.Errorf("amqp codec: compound %#02x of %d elements ends %d bytes before its size", c, count, end-at)
		}
		if c == codeMap8 || c == codeMap32 {
			return []any(items), end, nil
		}
		return items, end, nil
	}
	return nil, 0, fmt.Errorf("amqp codec: type code %#02x not supported", c)
}

// performative decodes the frame body of an AMQP or SASL frame (the bytes
// after the frame header) into its descriptor code and fields (trailing
// nulls dropped), and returns the payload that follows.
func performative(body []byte) (code uint64, fields list, payload []byte, err error) {
	v, n, err := decode(body)
	if err != nil {
		return 0, nil, nil, err
	}
	d, ok := v.(described)
	if !ok {
		return 0, nil, nil, fmt.Errorf("amqp codec: frame body is a %T, not a performative", v)
	}
	l, ok := d.value.(list)
	if !ok {
		return 0, nil, nil, fmt.Errorf("amqp codec: performative %#x is a %T, not a list", d.code, d.value)
	}
	return d.code, trimNulls(l), body[n:], nil
}
