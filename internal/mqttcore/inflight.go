// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2023 mochi-mqtt, mochi-co
// SPDX-FileContributor: mochi-co

package mqttcore

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Inflight is a map of InflightMessage keyed on packet id.
type Inflight struct {
	sync.RWMutex
	internal            map[uint16]packets.Packet // internal contains the inflight packets
	receiveQuota        int32                     // remaining inbound qos quota for flow control
	sendQuota           int32                     // remaining outbound qos quota for flow control
	maximumReceiveQuota int32                     // maximum allowed receive quota
	maximumSendQuota    int32                     // maximum allowed send quota
	bytes               int64                     // payload and topic bytes of the packets held [iotq patch 10]
	lastSeq             uint64                    // the Seq last assigned [iotq patch 20]
}

// packetBytes is what a held packet counts against a client's queued-bytes
// limit: its payload and topic name. [iotq patch 10]
func packetBytes(pk *packets.Packet) int64 {
	return int64(len(pk.Payload) + len(pk.TopicName))
}

// Bytes returns the payload and topic bytes of the packets held (QoS 1/2
// messages sent and not yet acknowledged, or queued). [iotq patch 10]
func (i *Inflight) Bytes() int64 {
	i.RLock()
	defer i.RUnlock()
	return i.bytes
}

// NewInflights returns a new instance of an Inflight packets map.
func NewInflights() *Inflight {
	return &Inflight{
		internal: map[uint16]packets.Packet{},
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
	old, ok := i.internal[m.PacketID]
	if ok {
		i.bytes -= packetBytes(&old) // [iotq patch 10]
	}
	switch {
	case m.Seq == 0 && ok && old.Seq != 0:
		m.Seq = old.Seq
	case m.Seq == 0:
		m.Seq = max(uint64(time.Now().UnixNano()), i.lastSeq+1)
		i.lastSeq = m.Seq
	default:
		i.lastSeq = max(i.lastSeq, m.Seq)
	}
	i.internal[m.PacketID] = *m
	i.bytes += packetBytes(m)
	return !ok
}

// MarkSent records that the message under id (with sequence seq) has been
// written to the client, so that a later resend carries DUP 1. [iotq patch 20]
func (i *Inflight) MarkSent(id uint16, seq uint64) (packets.Packet, bool) {
	i.Lock()
	defer i.Unlock()
	m, ok := i.internal[id]
	if !ok || m.Seq != seq || m.FixedHeader.Type != packets.Publish {
		return m, false
	}
	m.FixedHeader.Dup = true
	i.internal[id] = m
	return m, true
}

// Get returns an inflight packet by packet id.
func (i *Inflight) Get(id uint16) (packets.Packet, bool) {
	i.RLock()
	defer i.RUnlock()

	if m, ok := i.internal[id]; ok {
		return m, true
	}

	return packets.Packet{}, false
}

// Len returns the size of the inflight messages map.
func (i *Inflight) Len() int {
	i.RLock()
	defer i.RUnlock()
	return len(i.internal)
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
	c.bytes = i.bytes     // [iotq patch 10]
	c.lastSeq = i.lastSeq // [iotq patch 20]
	return c
}

// GetAll returns all the inflight messages.
func (i *Inflight) GetAll(immediate bool) []packets.Packet {
	i.RLock()
	defer i.RUnlock()

	m := []packets.Packet{}
	for _, v := range i.internal {
		if !immediate || (immediate && v.Expiry < 0) {
			m = append(m, v)
		}
	}

	sort.Slice(m, func(i, j int) bool { // [iotq patch 20]
		if m[i].Seq != m[j].Seq {
			return m[i].Seq < m[j].Seq
		}
		return m[i].PacketID < m[j].PacketID
	})

	return m
}

// NextImmediate returns the next inflight packet which is indicated to be sent immediately.
// This typically occurs when the quota has been exhausted, and we need to wait until new quota
// is free to continue sending.
func (i *Inflight) NextImmediate() (packets.Packet, bool) {
	i.RLock()
	defer i.RUnlock()

	m := i.GetAll(true)
	if len(m) > 0 {
		return m[0], true
	}

	return packets.Packet{}, false
}

// Delete removes an in-flight message from the map. Returns true if the message existed.
func (i *Inflight) Delete(id uint16) bool {
	i.Lock()
	defer i.Unlock()

	old, ok := i.internal[id]
	if ok {
		i.bytes -= packetBytes(&old) // [iotq patch 10]
	}
	delete(i.internal, id)

	return ok
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
