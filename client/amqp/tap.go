package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sync"
)

// terminus is what a broker's attach said about the source of one of our
// receiver links: whether the broker keeps it while the link is away.
type terminus struct {
	durable uint32 // 0 none, 1 configuration, 2 unsettled-state
	expiry  string // expiry policy; "" means the default, session-end
}

// attachTap is the conn go-amqp reads from: it passes every byte on as it
// is and notes, from the broker's attach frames for our receiver links,
// the source terminus the broker answered with (go-amqp does not expose
// it). A durable subscription needs it: a broker that cannot keep the
// subscription answers with a non-durable source (AMQP 1.0 part 2 section
// 2.6.3: the attach reply states the terminus as the peer holds it).
// Only attach frames are decoded; every other frame is skipped by its
// size. Protocol headers ("AMQP" and 4 bytes: SASL, TLS, AMQP) are
// recognised between frames (as frame sizes they would exceed any frame
// size limit).
type attachTap struct {
	net.Conn

	rmu  sync.Mutex // guards the parser (go-amqp reads from one goroutine)
	buf  []byte     // the start of the current unit, up to what we decode
	skip int        // bytes of the current frame left to pass unread

	mu      sync.Mutex // guards sources
	sources map[string]terminus
}

func newAttachTap(c net.Conn) *attachTap {
	return &attachTap{Conn: c, sources: map[string]terminus{}}
}

// maxTappedAttach bounds the attach frames decoded (an attach of a
// receiver link is some 100 to 500 bytes; larger ones are skipped).
const maxTappedAttach = 64 << 10

func (t *attachTap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 {
		t.rmu.Lock()
		t.feed(p[:n])
		t.rmu.Unlock()
	}
	return n, err
}

// source returns the source terminus of the broker's attach for the link
// named name.
func (t *attachTap) source(name string) (terminus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sources[name]
	return s, ok
}

func (t *attachTap) feed(b []byte) {
	for len(b) > 0 {
		if t.skip > 0 {
			k := min(t.skip, len(b))
			t.skip -= k
			b = b[k:]
			continue
		}
		t.buf = append(t.buf, b[0])
		b = b[1:]
		if len(t.buf) < 8 {
			continue
		}
		if string(t.buf[:4]) == "AMQP" { // a protocol header
			t.buf = t.buf[:0]
			continue
		}
		size := int(binary.BigEndian.Uint32(t.buf))
		doff := int(t.buf[4]) * 4
		if size < 8 || doff < 8 || doff > size {
			t.skip, t.buf = math.MaxInt, t.buf[:0] // not AMQP framing: stop parsing
			continue
		}
		// decide once the descriptor of the performative is in: 0x00 0x53 code
		if len(t.buf) < min(size, doff+3) {
			continue
		}
		if len(t.buf) == doff+3 && (t.buf[5] != frameAMQP || t.buf[doff] != codeDescribed ||
			t.buf[doff+1] != codeSmallUlng || t.buf[doff+2] != descAttach || size > maxTappedAttach) {
			t.skip, t.buf = size-len(t.buf), t.buf[:0]
			continue
		}
		if len(t.buf) < size {
			continue
		}
		if name, src, ok := attachSource(t.buf[doff:size]); ok {
			t.mu.Lock()
			t.sources[name] = src
			t.mu.Unlock()
		}
		t.buf = t.buf[:0]
	}
}

// attachSource decodes the link name and source terminus of an attach
// performative sent by the sending end of a link (the broker's reply to
// our receiver's attach).
func attachSource(body []byte) (string, terminus, bool) {
	fields, err := listPrefix(body, 6)
	if err != nil || len(fields) < 3 {
		return "", terminus{}, false
	}
	name, _ := fields[0].(string)
	if role, _ := fields[2].(bool); role { // role receiver: not the reply to ours
		return "", terminus{}, false
	}
	if len(fields) < 6 || fields[5] == nil {
		return name, terminus{}, name != ""
	}
	raw, ok := fields[5].(rawValue)
	if !ok {
		return "", terminus{}, false
	}
	sf, err := listPrefix(raw, 3)
	if err != nil {
		return "", terminus{}, false
	}
	var src terminus
	if len(sf) > 1 {
		src.durable, _ = sf[1].(uint32)
	}
	if len(sf) > 2 {
		if s, ok := sf[2].(symbol); ok {
			src.expiry = string(s)
		}
	}
	return name, src, name != ""
}

// rawValue is the encoding of a described value that listPrefix does not
// decode (a terminus), for a second listPrefix.
type rawValue []byte

// listPrefix decodes the first n elements of a described list at the
// start of b (a performative, a terminus), leaving the rest undecoded
// (it may hold types codec.go does not decode, such as arrays). Elements
// that are themselves described come back as rawValue.
func listPrefix(b []byte, n int) (list, error) {
	if len(b) < 3 || b[0] != codeDescribed {
		return nil, fmt.Errorf("amqp codec: not a described value")
	}
	_, dn, err := decode(b[1:])
	if err != nil {
		return nil, err
	}
	b = b[1+dn:]
	if len(b) == 0 {
		return nil, errShort
	}
	var count, h int
	switch b[0] {
	case codeList0:
		return list{}, nil
	case codeList8:
		if len(b) < 3 {
			return nil, errShort
		}
		count, h = int(b[2]), 3
	case codeList32:
		if len(b) < 9 {
			return nil, errShort
		}
		c := binary.BigEndian.Uint32(b[5:])
		if c > uint32(len(b)) {
			return nil, errShort
		}
		count, h = int(c), 9
	default:
		return nil, fmt.Errorf("amqp codec: described %#02x is not a list", b[0])
	}
	at := h
	var out list
	for i := 0; i < min(n, count); i++ {
		if at >= len(b) {
			return nil, errShort
		}
		m, err := valueLen(b[at:], 0)
		if err != nil {
			return nil, err
		}
		switch b[at] {
		case codeDescribed:
			out = append(out, rawValue(b[at:at+m]))
		case 0xe0, 0xf0: // arrays: not needed here
			out = append(out, nil)
		default:
			v, _, err := decode(b[at : at+m])
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		at += m
	}
	return out, nil
}

// valueLen returns the length of the encoded value at the start of b,
// from its constructor's subcategory (AMQP 1.0 part 1 section 1.6: the
// high nibble of the type code gives the width of the value or of its
// size field), without decoding it.
func valueLen(b []byte, depth int) (int, error) {
	if len(b) == 0 {
		return 0, errShort
	}
	if depth >= maxDepth {
		return 0, fmt.Errorf("amqp codec: values nested deeper than %d levels", maxDepth)
	}
	if b[0] == codeDescribed {
		d, err := valueLen(b[1:], depth+1)
		if err != nil {
			return 0, err
		}
		v, err := valueLen(b[1+d:], depth+1)
		if err != nil {
			return 0, err
		}
		return 1 + d + v, nil
	}
	var n int
	switch b[0] >> 4 {
	case 0x4:
		n = 1
	case 0x5:
		n = 2
	case 0x6:
		n = 3
	case 0x7:
		n = 5
	case 0x8:
		n = 9
	case 0x9:
		n = 17
	case 0xa, 0xc, 0xe:
		if len(b) < 2 {
			return 0, errShort
		}
		n = 2 + int(b[1])
	case 0xb, 0xd, 0xf:
		if len(b) < 5 {
			return 0, errShort
		}
		size := binary.BigEndian.Uint32(b[1:])
		if uint64(size) > uint64(len(b)-5) {
			return 0, errShort
		}
		n = 5 + int(size)
	default:
		return 0, fmt.Errorf("amqp codec: type code %#02x unknown", b[0])
	}
	if n > len(b) {
		return 0, errShort
	}
	return n, nil
}
