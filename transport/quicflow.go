package transport

import (
	"errors"
	"fmt"
)

// MQTT over QUIC flows (the MQTT-next mapping, docs/mqtt-quic.md).
//
// A stream may begin with a flow header; a stream that begins with any
// other byte carries MQTT packets from its first byte. The first byte of
// every MQTT packet type differs from the four flow types, so a reader can
// tell them apart from the first byte.

// Flow header types (the first byte, a QUIC varint below 64).
const (
	flowTypeControl     = 0x11
	flowTypeClientData  = 0x12
	flowTypeServerData  = 0x13
	flowTypeUserDefined = 0x14
)

// Stream error codes of the mapping, sent in STOP_SENDING and RESET_STREAM
// when the broker refuses a stream.
const (
	// StreamCodeStreamType: the stream's type is wrong (a control flow
	// header or a CONNECT on a data stream).
	StreamCodeStreamType = 0xB5
	// StreamCodeBadFlowID: the flow id is not one the client may use.
	StreamCodeBadFlowID = 0xB6
	// StreamCodeFlowRefused: the flow is refused (a user-defined flow, or
	// more data streams at once than the listener allows).
	StreamCodeFlowRefused = 0xBE
)

// Application error codes a QUIC listener closes connections with when a
// client breaks its stream rules. The reason phrase names the rule.
const (
	// QUICCodeStreamLimit: the connection opened a stream the listener does
	// not serve (single-stream listeners: any stream after the first).
	QUICCodeStreamLimit = 3
)

// ALPNMQTTNext is the ALPN of the MQTT-next mapping: a connection that
// negotiated it may carry flow headers; the broker then writes a server
// flow header on each stream it opens.
const ALPNMQTTNext = "MQTT-next"

// flowHeader is a parsed flow header.
type flowHeader struct {
	typ    byte
	id     uint64
	expire uint64 // seconds; data flows only
	flags  byte
}

// isFlowType reports whether b, the first byte of a stream, starts a flow
// header.
func isFlowType(b byte) bool {
	return b >= flowTypeControl && b <= flowTypeUserDefined
}

var errShortFlowHeader = errors.New("flow header incomplete")

// parseFlowHeader parses a flow header at the start of b. It returns the
// header and its length, errShortFlowHeader if b ends inside it, or another
// error if it is malformed. A user-defined header has no defined length:
// it is returned with n = 1.
func parseFlowHeader(b []byte) (h flowHeader, n int, err error) {
	if len(b) == 0 {
		return h, 0, errShortFlowHeader
	}
	h.typ = b[0]
	n = 1
	switch h.typ {
	case flowTypeUserDefined:
		return h, 1, nil
	case flowTypeControl, flowTypeClientData, flowTypeServerData:
	default:
		return h, 0, fmt.Errorf("unknown flow type 0x%02x", h.typ)
	}
	var k int
	if h.id, k, err = readVarint(b[n:]); err != nil {
		return h, 0, err
	}
	n += k
	if h.typ != flowTypeControl {
		if h.expire, k, err = readVarint(b[n:]); err != nil {
			return h, 0, err
		}
		n += k
	}
	if len(b) <= n {
		return h, 0, errShortFlowHeader
	}
	h.flags = b[n]
	return h, n + 1, nil
}

// appendFlowHeader appends a data flow header (type, id, expire interval,
// flags) to b.
func appendFlowHeader(b []byte, typ byte, id, expire uint64, flags byte) []byte {
	b = append(b, typ)
	b = appendVarint(b, id)
	b = appendVarint(b, expire)
	return append(b, flags)
}

// readVarint decodes a QUIC variable-length integer (RFC 9000, 16).
func readVarint(b []byte) (v uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, errShortFlowHeader
	}
	n = 1 << (b[0] >> 6)
	if len(b) < n {
		return 0, 0, errShortFlowHeader
	}
	v = uint64(b[0] & 0x3f)
	for i := 1; i < n; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v, n, nil
}

// appendVarint encodes v as a QUIC variable-length integer; v must be below
// 2^62.
func appendVarint(b []byte, v uint64) []byte {
	switch {
	case v < 1<<6:
		return append(b, byte(v))
	case v < 1<<14:
		return append(b, byte(v>>8)|0x40, byte(v))
	case v < 1<<30:
		return append(b, byte(v>>24)|0x80, byte(v>>16), byte(v>>8), byte(v))
	default:
		return append(b, byte(v>>56)|0xc0, byte(v>>48), byte(v>>40), byte(v>>32),
			byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// mqttPacketLen returns the total length of the MQTT packet at the start of
// b (fixed header plus remaining length), 0 if b ends inside the fixed
// header, or -1 if the remaining length is malformed (more than 4 bytes).
func mqttPacketLen(b []byte) int {
	n, mult := 0, 1
	for i := 1; i < len(b) && i <= 4; i++ {
		d := b[i]
		n += int(d&0x7f) * mult
		if d&0x80 == 0 {
			return 1 + i + n
		}
		mult *= 128
	}
	if len(b) >= 5 {
		return -1
	}
	return 0
}

// mqttHeaderLen returns the length of the fixed header of the complete
// packet pk.
func mqttHeaderLen(pk []byte) int {
	i := 1
	for i < len(pk) && i < 5 && pk[i]&0x80 != 0 {
		i++
	}
	return i + 1
}

// mqttPacketID returns the packet identifier that follows the fixed header
// of an acknowledgement or SUBSCRIBE/UNSUBSCRIBE packet.
func mqttPacketID(pk []byte) (uint16, bool) {
	h := mqttHeaderLen(pk)
	if len(pk) < h+2 {
		return 0, false
	}
	return uint16(pk[h])<<8 | uint16(pk[h+1]), true
}

// publishInfo is what routing needs from a PUBLISH packet.
type publishInfo struct {
	topic string
	qos   byte
	id    uint16 // packet identifier, QoS > 0
	alias bool   // carries a Topic Alias property (MQTT 5)
}

// parsePublish reads a complete PUBLISH packet. v5 says whether the
// connection speaks MQTT 5 (properties follow the packet identifier).
func parsePublish(pk []byte, v5 bool) (publishInfo, bool) {
	var p publishInfo
	p.qos = (pk[0] >> 1) & 3
	i := mqttHeaderLen(pk)
	if len(pk) < i+2 {
		return p, false
	}
	tl := int(pk[i])<<8 | int(pk[i+1])
	i += 2
	if len(pk) < i+tl {
		return p, false
	}
	p.topic = string(pk[i : i+tl])
	i += tl
	if p.qos > 0 {
		if len(pk) < i+2 {
			return p, false
		}
		p.id = uint16(pk[i])<<8 | uint16(pk[i+1])
		i += 2
	}
	if v5 {
		plen, k := 0, 0
		for mult := 1; k < 4; mult *= 128 {
			if len(pk) <= i+k {
				return p, false
			}
			d := pk[i+k]
			plen += int(d&0x7f) * mult
			k++
			if d&0x80 == 0 {
				break
			}
		}
		props := pk[i+k:]
		if len(props) > plen {
			props = props[:plen]
		}
		p.alias = hasTopicAlias(props)
	}
	return p, true
}

// hasTopicAlias walks MQTT 5 PUBLISH properties looking for Topic Alias
// (0x23). Unknown or malformed properties end the walk.
func hasTopicAlias(props []byte) bool {
	for i := 0; i < len(props); {
		id := props[i]
		i++
		switch id {
		case 0x23: // topic alias
			return true
		case 0x01: // payload format indicator: byte
			i++
		case 0x02: // message expiry interval: four bytes
			i += 4
		case 0x08, 0x09, 0x03: // response topic, correlation data, content type: length-prefixed
			if i+2 > len(props) {
				return false
			}
			i += 2 + (int(props[i])<<8 | int(props[i+1]))
		case 0x26: // user property: two strings
			for range 2 {
				if i+2 > len(props) {
					return false
				}
				i += 2 + (int(props[i])<<8 | int(props[i+1]))
			}
		case 0x0B: // subscription identifier: varint
			for i < len(props) && props[i]&0x80 != 0 {
				i++
			}
			i++
		default:
			return false
		}
	}
	return false
}
