// SPDX-License-Identifier: MIT

package packets

import (
	"bytes"
	"sync"
)

// SharedEncoding lets the copies of one PUBLISH that go to several
// subscribers share one encoding. [iotq patch 16]
//
// Upstream encoded the message once per subscriber. The copies differ only
// in what the subscriber's session gives them: the packet identifier
// (patched into the shared bytes), and the protocol version, QoS, retain
// and DUP flags, message expiry, encoding limits, subscription identifiers
// and topic alias. Copies with a subscription identifier or topic alias are
// encoded on their own; the others reuse the first encoding whose flags,
// version, limits and expiry match theirs.
type SharedEncoding struct {
	mu        sync.Mutex
	key       sharedKey
	b         []byte // the encoded packet; nil until the first encoding
	idAt      int    // offset of the packet identifier in b (QoS > 0)
	remaining int
	queued    [2]*Packet // the QoS 0 copy queued for every subscriber, without and with Retain [iotq patch 33]
}

type sharedKey struct {
	version, qos byte
	retain, dup  bool
	mods         Mods
	expiry       uint32
}

// Shareable reports whether pk (a PUBLISH carrying a SharedEncoding) may
// use it: no per-subscriber properties.
func (pk *Packet) Shareable() bool {
	if pk.Shared == nil || pk.FixedHeader.Type != Publish || pk.Properties.TopicAlias != 0 || pk.TopicName == "" {
		return false
	}
	for _, id := range pk.Properties.SubscriptionIdentifier {
		if id > 0 {
			return false
		}
	}
	return true
}

// Encode writes pk to buf, from the shared encoding if one matches pk,
// else by PublishEncode (and keeps that encoding for the next copies if
// none is kept yet). pk must be Shareable.
func (e *SharedEncoding) Encode(pk *Packet, buf *bytes.Buffer) error {
	key := sharedKey{
		version: pk.ProtocolVersion, qos: pk.FixedHeader.Qos,
		retain: pk.FixedHeader.Retain, dup: pk.FixedHeader.Dup,
		mods: pk.Mods, expiry: pk.Properties.MessageExpiryInterval,
	}
	e.mu.Lock()
	if e.b != nil && e.key == key {
		start := buf.Len()
		buf.Write(e.b)
		if key.qos > 0 {
			if pk.PacketID == 0 {
				e.mu.Unlock()
				return ErrProtocolViolationNoPacketID // [MQTT-2.2.1-2]
			}
			b := buf.Bytes()[start+e.idAt:]
			b[0], b[1] = byte(pk.PacketID>>8), byte(pk.PacketID)
		}
		pk.FixedHeader.Remaining = e.remaining
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()

	start := buf.Len()
	if err := pk.PublishEncode(buf); err != nil {
		return err
	}
	e.mu.Lock()
	if e.b == nil {
		e.key = key
		e.b = append([]byte(nil), buf.Bytes()[start:]...)
		e.remaining = pk.FixedHeader.Remaining
		// fixed header byte, remaining length, topic length and topic
		e.idAt = 1 + lengthSize(pk.FixedHeader.Remaining) + 2 + len(pk.TopicName)
	}
	e.mu.Unlock()
	return nil
}

// QueuedCopy returns the packet to queue for a subscriber whose copy of the
// message is out, a QoS 0 copy with no per-subscriber properties (no topic
// alias, no subscription identifier): every such subscriber of the message
// queues the same packet, which no one changes once queued. Upstream
// queued a fresh 816-byte Packet per subscriber. [iotq patch 33]
func (e *SharedEncoding) QueuedCopy(out *Packet) *Packet {
	i := 0
	if out.FixedHeader.Retain {
		i = 1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queued[i] == nil {
		p := new(Packet)
		*p = *out
		e.queued[i] = p
	}
	return e.queued[i]
}

// lengthSize is the number of bytes of an MQTT variable byte integer.
func lengthSize(n int) int {
	size := 1
	for n > 127 {
		n >>= 7
		size++
	}
	return size
}
