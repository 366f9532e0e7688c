// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2023 mochi-mqtt, mochi-co
// SPDX-FileContributor: mochi-co

package mqttcore

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Inflight is a map of InflightMessage keyed on packet id.
//
// [iotq patch 22] The QoS 1/2 flow packets (PUBLISH, PUBACK, PUBREC,
// PUBREL, PUBCOMP) are kept in held, in a compact form of about 128 bytes
// plus their payload, topic and properties; upstream kept every one as a
// packets.Packet by value (816 bytes, stored out of line by the map: 896
// bytes each), so 65 535 queued 20-byte messages took 59 MB. Other packets
// (none in the engine's own use) stay whole in internal, upstream's map.
// A packet id is in at most one of the two.
type Inflight struct {
	sync.RWMutex
	internal            map[uint16]packets.Packet // packets kept whole (not a QoS flow packet) [iotq patch 22]
	held                map[uint16]*heldPacket    // QoS flow packets, compact [iotq patch 22]
	receiveQuota        int32                     // remaining inbound qos quota for flow control
	sendQuota           int32                     // remaining outbound qos quota for flow control
	maximumReceiveQuota int32                     // maximum allowed receive quota
	maximumSendQuota    int32                     // maximum allowed send quota
	bytes               int64                     // what the packets held cost (QueuedCost) [iotq patch 10, 22]
	lastSeq             uint64                    // the Seq last assigned [iotq patch 20]
	immediate           int                       // held packets with Expiry < 0 (waiting for send quota) [iotq patch 22]
	// inbound holds the client's QoS 2 exchanges that await its PUBREL:
	// the PUBREC sent, under the client's packet identifier. The client's
	// identifiers are a space apart from the server's (3.1.1 section
	// 2.3.1, 5.0 section 2.2.1); upstream kept these records in the same
	// map, where one replaced the server's message under the same id.
	// nil until the first. [iotq patch 56]
	inbound map[uint16]*heldPacket
	// resending: a reconnecting client's resend is under way, and every
	// new delivery waits behind what the session held (waitOrTakeQuota).
	// [iotq patch 61]
	resending bool
}

// heldPacket is a QoS flow packet as the in-flight store keeps it: every
// field such a packet uses, the properties only when there are any, and
// not the shared encoding of a fan-out (a resend encodes on its own).
// [iotq patch 22]
type heldPacket struct {
	payload             []byte
	topic               string
	origin              string
	props               *packets.Properties // nil: none
	created             int64
	expiry              int64
	seq                 uint64
	remaining           int
	maxSize             uint32
	packetID            uint16
	typ                 byte
	qos                 byte
	dup                 bool
	retain              bool
	version             byte
	reasonCode          byte
	reservedBit         byte
	ignore              bool
	sessionPresent      bool
	disallowProblemInfo bool
	allowResponseInfo   bool
}

// heldOverhead is what the in-flight store spends on a message besides its
// payload, topic and properties: the compact entry (120 bytes, allocated
// in the 128-byte size class), its share of the map (a 16-byte slot in
// groups of 8, the map between half and 7/8 full: about 32 bytes) and the
// rest of the read buffer that payload and topic share (packet id, topic
// length, size-class rounding: about 16). Measured: 200 bytes of heap per
// held message of 20 bytes with a 9-byte topic (TestStuckSubscriberMemoryBounded),
// QueuedCost 205. [iotq patch 22]
const heldOverhead = 128 + 32 + 16

// queuedOverhead is what a packet in a client's outbound queue costs
// besides its payload, topic and properties: the packet (a packets.Packet,
// allocated in the 896-byte size class), its slot in the ring and the rest
// of its read buffer. [iotq patch 22]
const queuedOverhead = 896 + 8 + 16

// QueuedCost is what a message held for a client costs and counts against
// Capabilities.MaximumClientQueuedBytes: its payload, topic name and
// properties plus the engine's structure around it: the compact in-flight
// entry for QoS 1/2 (176 bytes), the queued packet for QoS 0 (920 bytes). Patch 10 counted payload and topic only, so a session of
// 20-byte messages reached max_inflight (65 535) at 1.4 MB counted and 54
// MB of heap.
// [iotq patch 22]
func QueuedCost(pk *packets.Packet) int64 {
	n := int64(len(pk.Payload) + len(pk.TopicName))
	if pk.FixedHeader.Qos == 0 {
		n += queuedOverhead
	} else {
		n += heldOverhead
	}
	if !pk.Properties.Empty() {
		n += propertiesCost(&pk.Properties)
	}
	return n
}

// propertiesCost is the memory a packet's properties take when kept apart
// from the packet: the struct and what its slices and strings hold.
// [iotq patch 22]
func propertiesCost(p *packets.Properties) int64 {
	n := int(unsafe.Sizeof(*p)) + len(p.CorrelationData) + len(p.AuthenticationData) + 8*len(p.SubscriptionIdentifier) +
		len(p.ContentType) + len(p.ResponseTopic) + len(p.AssignedClientID) + len(p.AuthenticationMethod) +
		len(p.ResponseInfo) + len(p.ServerReference) + len(p.ReasonString)
	for _, u := range p.User {
		n += int(unsafe.Sizeof(u)) + len(u.Key) + len(u.Val)
	}
	return int64(n)
}

// wholeCost is what a packet kept whole costs in the in-flight store.
// [iotq patch 22]
func wholeCost(pk *packets.Packet) int64 {
	return int64(len(pk.Payload)+len(pk.TopicName)) + queuedOverhead
}

// compactable reports whether pk is a QoS flow packet that heldPacket
// represents exactly. [iotq patch 22]
func compactable(pk *packets.Packet) bool {
	switch pk.FixedHeader.Type {
	case packets.Publish, packets.Puback, packets.Pubrec, packets.Pubrel, packets.Pubcomp:
	default:
		return false
	}
	return pk.Filters == nil && pk.ReasonCodes == nil && pk.Connect.Empty()
}

func newHeld(pk *packets.Packet) *heldPacket {
	h := &heldPacket{
		payload:             pk.Payload,
		topic:               pk.TopicName,
		origin:              pk.Origin,
		created:             pk.Created,
		expiry:              pk.Expiry,
		seq:                 pk.Seq,
		remaining:           pk.FixedHeader.Remaining,
		maxSize:             pk.Mods.MaxSize,
		packetID:            pk.PacketID,
		typ:                 pk.FixedHeader.Type,
		qos:                 pk.FixedHeader.Qos,
		dup:                 pk.FixedHeader.Dup,
		retain:              pk.FixedHeader.Retain,
		version:             pk.ProtocolVersion,
		reasonCode:          pk.ReasonCode,
		reservedBit:         pk.ReservedBit,
		ignore:              pk.Ignore,
		sessionPresent:      pk.SessionPresent,
		disallowProblemInfo: pk.Mods.DisallowProblemInfo,
		allowResponseInfo:   pk.Mods.AllowResponseInfo,
	}
	if !pk.Properties.Empty() {
		p := pk.Properties
		h.props = &p
	}
	return h
}

func (h *heldPacket) packet() packets.Packet {
	pk := packets.Packet{
		Payload:   h.payload,
		TopicName: h.topic,
		Origin:    h.origin,
		FixedHeader: packets.FixedHeader{
			Remaining: h.remaining,
			Type:      h.typ,
			Qos:       h.qos,
			Dup:       h.dup,
			Retain:    h.retain,
		},
		Created: h.created,
		Expiry:  h.expiry,
		Mods: packets.Mods{
			MaxSize:             h.maxSize,
			DisallowProblemInfo: h.disallowProblemInfo,
			AllowResponseInfo:   h.allowResponseInfo,
		},
		PacketID:        h.packetID,
		ProtocolVersion: h.version,
		SessionPresent:  h.sessionPresent,
		ReasonCode:      h.reasonCode,
		ReservedBit:     h.reservedBit,
		Ignore:          h.ignore,
		Seq:             h.seq,
	}
	if h.props != nil {
		pk.Properties = *h.props
	}
	return pk
}

func (h *heldPacket) cost() int64 {
	n := int64(len(h.payload)+len(h.topic)) + heldOverhead
	if h.props != nil {
		n += propertiesCost(h.props)
	}
	return n
}

// Bytes returns what the packets held cost (QueuedCost: QoS 1/2 messages
// sent and not yet acknowledged, or queued). [iotq patch 10, 22]
func (i *Inflight) Bytes() int64 {
	i.RLock()
	defer i.RUnlock()
	return i.bytes
}

// NewInflights returns a new instance of an Inflight packets map.
func NewInflights() *Inflight {
	return &Inflight{
		internal: map[uint16]packets.Packet{},
		held:     map[uint16]*heldPacket{}, // [iotq patch 22]
	}
}

// Set adds or updates an inflight packet by packet id.
//
// [iotq patch 20] A packet without a Seq gets one: the Seq of the packet it
// replaces (a PUBREL keeps its PUBLISH's place), or else the next in this
// store's order, so GetAll returns messages in the order they were put in
// flight, which for a subscriber is the order they were published (MQTT
// section 4.6). Seqs are wall-clock nanoseconds made strictly increasing
// per store: they stay ordered when sessions move between connections and
// across a restart with the store, where they are kept. Upstream ordered
// by the creation second truncated to 16 bits, and sort.Slice is not
// stable, so an offline session's messages came back shuffled.
func (i *Inflight) Set(m packets.Packet) bool {
	i.Lock()
	defer i.Unlock()
	return i.setLocked(&m)
}

// SetSeq is Set that also writes the Seq it assigned into *m, for a caller
// that stores the packet elsewhere too (the storage hooks). [iotq patch 20]
func (i *Inflight) SetSeq(m *packets.Packet) bool {
	i.Lock()
	defer i.Unlock()
	return i.setLocked(m)
}

func (i *Inflight) setLocked(m *packets.Packet) bool {
	oldSeq, ok := i.removeLocked(m.PacketID) // [iotq patch 22]
	switch {
	case m.Seq == 0 && ok && oldSeq != 0:
		m.Seq = oldSeq
	case m.Seq == 0:
		m.Seq = max(uint64(time.Now().UnixNano()), i.lastSeq+1)
		i.lastSeq = m.Seq
	default:
		i.lastSeq = max(i.lastSeq, m.Seq)
	}
	if compactable(m) { // [iotq patch 22]
		h := newHeld(m)
		i.held[m.PacketID] = h
		i.bytes += h.cost()
		if h.expiry < 0 {
			i.immediate++
		}
	} else {
		i.internal[m.PacketID] = *m
		i.bytes += wholeCost(m)
	}
	return !ok
}

// removeLocked removes the packet under id from either map and returns its
// Seq. [iotq patch 22]
func (i *Inflight) removeLocked(id uint16) (seq uint64, ok bool) {
	if h, found := i.held[id]; found {
		i.bytes -= h.cost()
		if h.expiry < 0 {
			i.immediate--
		}
		delete(i.held, id)
		return h.seq, true
	}
	if pk, found := i.internal[id]; found {
		i.bytes -= wholeCost(&pk)
		delete(i.internal, id)
		return pk.Seq, true
	}
	return 0, false
}

// MarkSent records that the message under id (with sequence seq) has been
// written to the client, so that a later resend carries DUP 1. [iotq patch 20]
func (i *Inflight) MarkSent(id uint16, seq uint64) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	if h, ok := i.held[id]; ok { // [iotq patch 22]
		if h.seq != seq || h.typ != packets.Publish {
			return h.packet(), false
		}
		h.dup = true
		return h.packet(), true
	}
	m, ok := i.internal[id]
	if !ok || m.Seq != seq || m.FixedHeader.Type != packets.Publish {
		return m, false
	}
	m.FixedHeader.Dup = true
	i.internal[id] = m
	return m, true
}

// markSent is MarkSent for a caller that does not need the packet (the
// write loop, once per QoS 1/2 message). [iotq patch 22] It reports
// whether the message is still in flight under id and seq. [iotq patch 59]
func (i *Inflight) markSent(id uint16, seq uint64) bool {
	i.Lock()
	defer i.Unlock()
	if h, ok := i.held[id]; ok {
		if h.seq == seq && h.typ == packets.Publish {
			h.dup = true
			return true
		}
		return false
	}
	if m, ok := i.internal[id]; ok && m.Seq == seq && m.FixedHeader.Type == packets.Publish {
		m.FixedHeader.Dup = true
		i.internal[id] = m
		return true
	}
	return false
}

// Get returns an inflight packet by packet id.
func (i *Inflight) Get(id uint16) (packets.Packet, bool) {
	i.RLock()
	defer i.RUnlock()

	if h, ok := i.held[id]; ok { // [iotq patch 22]
		return h.packet(), true
	}
	if m, ok := i.internal[id]; ok {
		return m, true
	}

	return packets.Packet{}, false
}

// has reports whether a packet is in flight under id. [iotq patch 22]
func (i *Inflight) has(id uint16) bool {
	i.RLock()
	defer i.RUnlock()
	if _, ok := i.held[id]; ok {
		return true
	}
	_, ok := i.internal[id]
	return ok
}

// Len returns the size of the inflight messages map.
func (i *Inflight) Len() int {
	i.RLock()
	defer i.RUnlock()
	return len(i.internal) + len(i.held) // [iotq patch 22]
}

// Clone returns a new instance of Inflight with the same message data.
// This is used when transferring inflights from a taken-over session.
func (i *Inflight) Clone() *Inflight {
	c := NewInflights()
	i.RLock()
	defer i.RUnlock()
	for k, v := range i.internal {
		c.internal[k] = v
	}
	for k, v := range i.held { // entries change in place (MarkSent): copied [iotq patch 22]
		h := *v
		c.held[k] = &h
	}
	if len(i.inbound) > 0 { // [iotq patch 56]
		c.inbound = make(map[uint16]*heldPacket, len(i.inbound))
		for k, v := range i.inbound {
			h := *v
			c.inbound[k] = &h
		}
	}
	c.bytes = i.bytes         // [iotq patch 10]
	c.lastSeq = i.lastSeq     // [iotq patch 20]
	c.immediate = i.immediate // [iotq patch 22]
	return c
}

// inflightRef names one packet of the store, for ordering. [iotq patch 22]
type inflightRef struct {
	seq uint64
	id  uint16
}

// refs returns the packets in flight, ordered by Seq, then packet id.
// [iotq patch 48]
func (i *Inflight) refs() []inflightRef {
	i.RLock()
	defer i.RUnlock()
	return i.refsLocked(false)
}

// sortRefs orders refs by Seq, then packet id: the order of first sends.
func sortRefs(refs []inflightRef) {
	slices.SortFunc(refs, func(a, b inflightRef) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.id, b.id))
	})
}

// refsLocked returns the packets in flight (only those waiting for send
// quota if immediate), ordered by Seq, then packet id. [iotq patch 20, 22]
func (i *Inflight) refsLocked(immediate bool) []inflightRef {
	n := len(i.held) + len(i.internal)
	if immediate {
		n = i.immediate + len(i.internal)
	}
	refs := make([]inflightRef, 0, n)
	for id, h := range i.held {
		if !immediate || h.expiry < 0 {
			refs = append(refs, inflightRef{h.seq, id})
		}
	}
	for id, v := range i.internal {
		if !immediate || v.Expiry < 0 {
			refs = append(refs, inflightRef{v.Seq, id})
		}
	}
	sortRefs(refs)
	return refs
}

// getLocked returns the packet under id. [iotq patch 22]
func (i *Inflight) getLocked(id uint16) (packets.Packet, bool) {
	if h, ok := i.held[id]; ok {
		return h.packet(), true
	}
	m, ok := i.internal[id]
	return m, ok
}

// GetAll returns all the inflight messages.
func (i *Inflight) GetAll(immediate bool) []packets.Packet {
	i.RLock()
	defer i.RUnlock()

	// [iotq patch 22] Ordered as references, then copied out: upstream
	// sorted the 816-byte packets themselves.
	refs := i.refsLocked(immediate)
	m := make([]packets.Packet, 0, len(refs))
	for _, r := range refs {
		pk, _ := i.getLocked(r.id)
		m = append(m, pk)
	}
	return m
}

// IDs returns the packet ids in flight in the order GetAll returns their
// packets, for a caller that goes through a large session one packet at a
// time (GetAll copies every packet at once). [iotq patch 22]
func (i *Inflight) IDs() []uint16 {
	i.RLock()
	defer i.RUnlock()
	refs := i.refsLocked(false)
	ids := make([]uint16, len(refs))
	for k, r := range refs {
		ids[k] = r.id
	}
	return ids
}

// NextImmediate returns the next inflight packet which is indicated to be sent immediately.
// This typically occurs when the quota has been exhausted, and we need to wait until new quota
// is free to continue sending.
func (i *Inflight) NextImmediate() (packets.Packet, bool) {
	i.RLock()
	defer i.RUnlock()

	// [iotq patch 22] Counted, not searched for: the engine asks after
	// every inbound packet, and upstream copied and sorted every packet in
	// flight each time (O(n) per PUBACK).
	if i.immediate == 0 && len(i.internal) == 0 {
		return packets.Packet{}, false
	}
	refs := i.refsLocked(true)
	if len(refs) > 0 {
		return i.getLocked(refs[0].id)
	}

	return packets.Packet{}, false
}

// releaseNext takes the oldest PUBLISH waiting for send quota out of
// waiting, with a unit of the quota, and returns it as it is to be sent
// (markSendingLocked); false if none waits or the quota is used up. The
// quota is checked and taken under the store's lock, as waitOrTakeQuota
// takes it. [iotq patch 47, 61]
func (i *Inflight) releaseNext(expiry func(*packets.Packet) int64) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	if i.resending || atomic.LoadInt32(&i.sendQuota) <= 0 || i.immediate == 0 && len(i.internal) == 0 {
		return packets.Packet{}, false
	}
	refs := i.refsLocked(true)
	if len(refs) == 0 {
		return packets.Packet{}, false
	}
	pk, ok := i.markSendingLocked(refs[0].id, refs[0].seq, expiry)
	if ok {
		atomic.AddInt32(&i.sendQuota, -1)
	}
	return pk, ok
}

// waitOrTakeQuota decides for the PUBLISH under id (sequence seq), a new
// delivery just put in flight, whether it is sent now. Under the client's
// Receive Maximum [MQTT-3.3.4-9] it takes a unit of the send quota and
// reports false, or it is marked waiting and true is reported: when the
// quota is used up, when other messages wait, which it must not overtake
// [MQTT-4.6.0-6], and while a reconnecting client's resend is under way.
// Decided under the store's lock, as releaseNext releases: upstream read
// the quota, took it, and marked the message waiting in three steps, so a
// message that went on to wait could still take quota (each such message
// lowered the client's Receive Maximum for good, until deliveries stopped),
// and one marked waiting after the acknowledgement that would have let it
// go waited for the client's next packet. [iotq patch 61]
func (i *Inflight) waitOrTakeQuota(id uint16, seq uint64) bool {
	if atomic.LoadInt32(&i.maximumSendQuota) <= 0 {
		return false
	}
	i.Lock()
	defer i.Unlock()
	if !i.resending && atomic.LoadInt32(&i.sendQuota) > 0 && !i.anyWaitingLocked() {
		atomic.AddInt32(&i.sendQuota, -1)
		return false
	}
	i.markWaitingLocked(id, seq)
	return true
}

// beginResend makes every new delivery wait (waitOrTakeQuota) until
// endResend: the messages the session held go first. [iotq patch 61]
func (i *Inflight) beginResend() {
	i.Lock()
	defer i.Unlock()
	i.resending = true
}

// endResend ends what beginResend began.
func (i *Inflight) endResend() {
	i.Lock()
	defer i.Unlock()
	i.resending = false
}

// markSending records that the PUBLISH under id (sequence seq) is about
// to be sent: it stays in flight with DUP 1 for any later resend and, if
// it was waiting for send quota, with the expiry that expiry gives it. It
// returns the packet as it is to be sent now (DUP as it was); false if the
// packet is no longer there. [iotq patch 47]
func (i *Inflight) markSending(id uint16, seq uint64, expiry func(*packets.Packet) int64) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	return i.markSendingLocked(id, seq, expiry)
}

func (i *Inflight) markSendingLocked(id uint16, seq uint64, expiry func(*packets.Packet) int64) (packets.Packet, bool) {
	pk, ok := i.getLocked(id)
	if !ok || pk.Seq != seq || pk.FixedHeader.Type != packets.Publish {
		return pk, false
	}
	if pk.Expiry < 0 {
		pk.Expiry = expiry(&pk)
	}
	stored := pk
	stored.FixedHeader.Dup = true
	i.setLocked(&stored)
	return pk, true
}

// anyWaiting reports whether a packet waits for send quota. [iotq patch 47]
func (i *Inflight) anyWaiting() bool {
	i.RLock()
	defer i.RUnlock()
	return i.anyWaitingLocked()
}

func (i *Inflight) anyWaitingLocked() bool {
	if i.immediate > 0 {
		return true
	}
	for _, v := range i.internal {
		if v.Expiry < 0 {
			return true
		}
	}
	return false
}

// markWaiting records that the PUBLISH under id (sequence seq) waits for
// send quota (the client's Receive Maximum): acknowledgements let such
// packets go, oldest first (releaseNext). [iotq patch 47]
func (i *Inflight) markWaiting(id uint16, seq uint64) bool {
	i.Lock()
	defer i.Unlock()
	return i.markWaitingLocked(id, seq)
}

func (i *Inflight) markWaitingLocked(id uint16, seq uint64) bool {
	pk, ok := i.getLocked(id)
	if !ok || pk.Seq != seq || pk.FixedHeader.Type != packets.Publish {
		return false
	}
	if pk.Expiry >= 0 {
		pk.Expiry = -1
		i.setLocked(&pk)
	}
	return true
}

// Delete removes an in-flight message from the map. Returns true if the message existed.
func (i *Inflight) Delete(id uint16) bool {
	i.Lock()
	defer i.Unlock()

	_, ok := i.removeLocked(id) // [iotq patch 10, 22]
	return ok
}

// Take removes the in-flight message under id and returns it. [iotq patch 22]
func (i *Inflight) Take(id uint16) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	pk, ok := i.getLocked(id)
	if ok {
		i.removeLocked(id)
	}
	return pk, ok
}

// takeSeq is Take for the message under id only if its Seq is seq (the id
// may have gone to another message since). [iotq patch 22]
func (i *Inflight) takeSeq(id uint16, seq uint64) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	pk, ok := i.getLocked(id)
	if !ok || pk.Seq != seq {
		return packets.Packet{}, false
	}
	i.removeLocked(id)
	return pk, true
}

// expiredIDs returns the ids of the messages that have expired at now:
// their own MQTT 5 expiry passed, or they are older than maximumExpiry
// (if > 0). [iotq patch 22]
func (i *Inflight) expiredIDs(now, maximumExpiry int64) []uint16 {
	i.RLock()
	defer i.RUnlock()
	var ids []uint16
	for id, h := range i.held {
		if !deliveryStarted(h.typ, h.dup) && expiredAt(now, maximumExpiry, h.version, h.expiry, h.created) {
			ids = append(ids, id)
		}
	}
	for id, v := range i.internal {
		if !deliveryStarted(v.FixedHeader.Type, v.FixedHeader.Dup) && expiredAt(now, maximumExpiry, v.ProtocolVersion, v.Expiry, v.Created) {
			ids = append(ids, id)
		}
	}
	return ids
}

// deliveryStarted reports whether a record of the server's of type typ
// (DUP flag dup) may have reached the client: a PUBLISH written before
// (DUP 1, patch 20) or its PUBREL. Expiry ends only a delivery that has not
// started [MQTT-3.3.2-5]; one that has stays until the client acknowledges
// it, or its identifier, once freed, could go to the next message while
// the client's acknowledgement of this one is on its way, and that
// acknowledgement would complete the next message unseen. [iotq patch 57]
func deliveryStarted(typ byte, dup bool) bool {
	return typ == packets.Pubrel || typ == packets.Publish && dup
}

// expiredAt reports whether a record of the given protocol version,
// expiry and creation time has expired at now: its own MQTT 5 expiry
// passed, or it is older than maximumExpiry (if > 0). [iotq patch 22]
func expiredAt(now, maximumExpiry int64, version byte, expiry, created int64) bool {
	return (version == 5 && expiry > 0 && expiry < now) || // [MQTT-3.3.2-5]
		(maximumExpiry > 0 && now-created > maximumExpiry)
}

// SetInbound records the client's QoS 2 exchange whose PUBREC is rec
// (under rec.PacketID, the client's identifier) until its PUBREL. It
// returns false if the exchange was open already. [iotq patch 56]
func (i *Inflight) SetInbound(rec packets.Packet) bool {
	i.Lock()
	defer i.Unlock()
	if i.inbound == nil {
		i.inbound = map[uint16]*heldPacket{}
	}
	_, had := i.inbound[rec.PacketID]
	i.inbound[rec.PacketID] = newHeld(&rec)
	return !had
}

// GetInbound returns the PUBREC record of the client's open QoS 2
// exchange under id. [iotq patch 56]
func (i *Inflight) GetInbound(id uint16) (packets.Packet, bool) {
	i.RLock()
	defer i.RUnlock()
	if h, ok := i.inbound[id]; ok {
		return h.packet(), true
	}
	return packets.Packet{}, false
}

// HasInbound reports whether the client has a QoS 2 exchange open under
// id. [iotq patch 56]
func (i *Inflight) HasInbound(id uint16) bool {
	i.RLock()
	defer i.RUnlock()
	_, ok := i.inbound[id]
	return ok
}

// TakeInbound ends the client's QoS 2 exchange under id and returns its
// PUBREC record. [iotq patch 56]
func (i *Inflight) TakeInbound(id uint16) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	h, ok := i.inbound[id]
	if !ok {
		return packets.Packet{}, false
	}
	delete(i.inbound, id)
	return h.packet(), true
}

// InboundLen returns the number of the client's open QoS 2 exchanges.
// [iotq patch 56]
func (i *Inflight) InboundLen() int {
	i.RLock()
	defer i.RUnlock()
	return len(i.inbound)
}

// inboundRecords returns the PUBREC records of the client's open QoS 2
// exchanges, in the order they were opened. [iotq patch 56]
func (i *Inflight) inboundRecords() []packets.Packet {
	i.RLock()
	defer i.RUnlock()
	recs := make([]packets.Packet, 0, len(i.inbound))
	for _, h := range i.inbound {
		recs = append(recs, h.packet())
	}
	slices.SortFunc(recs, func(a, b packets.Packet) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.PacketID, b.PacketID))
	})
	return recs
}

// TakeRecieveQuota reduces the receive quota by 1.
func (i *Inflight) DecreaseReceiveQuota() {
	if atomic.LoadInt32(&i.receiveQuota) > 0 {
		atomic.AddInt32(&i.receiveQuota, -1)
	}
}

// TakeRecieveQuota increases the receive quota by 1.
func (i *Inflight) IncreaseReceiveQuota() {
	if atomic.LoadInt32(&i.receiveQuota) < atomic.LoadInt32(&i.maximumReceiveQuota) {
		atomic.AddInt32(&i.receiveQuota, 1)
	}
}

// ResetReceiveQuota resets the receive quota to the maximum allowed value.
func (i *Inflight) ResetReceiveQuota(n int32) {
	atomic.StoreInt32(&i.receiveQuota, n)
	atomic.StoreInt32(&i.maximumReceiveQuota, n)
}

// DecreaseSendQuota reduces the send quota by 1.
func (i *Inflight) DecreaseSendQuota() {
	if atomic.LoadInt32(&i.sendQuota) > 0 {
		atomic.AddInt32(&i.sendQuota, -1)
	}
}

// IncreaseSendQuota increases the send quota by 1.
func (i *Inflight) IncreaseSendQuota() {
	if atomic.LoadInt32(&i.sendQuota) < atomic.LoadInt32(&i.maximumSendQuota) {
		atomic.AddInt32(&i.sendQuota, 1)
	}
}

// ResetSendQuota resets the send quota to the maximum allowed value.
func (i *Inflight) ResetSendQuota(n int32) {
	atomic.StoreInt32(&i.sendQuota, n)
	atomic.StoreInt32(&i.maximumSendQuota, n)
}
