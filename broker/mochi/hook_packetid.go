package mochi

import (
	"bytes"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Packet identifiers: MQTT gives each direction its own identifier space,
// but the engine keeps inbound QoS 2 state (the PUBREC awaiting PUBREL) and
// outbound messages in one map per client, and an inbound QoS 2 PUBLISH
// replaces whatever outbound message waits under the same identifier
// (mochi issue #545): a client that publishes with QoS 2 and subscribes
// with QoS 1 or 2 would lose messages. (An inbound QoS 1 PUBLISH leaves
// the map alone since engine patch 52.)
//
// packetIDHook works around it: OnPacketRead sets the outbound message
// aside; OnPacketProcessed puts it back after the PUBREL that ends the
// inbound QoS 2 exchange (and into the store, whose copy the inbound
// processing removed). If the client acknowledges the outbound message in
// between, it may be delivered once more after a reconnect: a duplicate,
// never a loss.
type packetIDHook struct {
	mqttcore.HookBase
	e          *Engine
	receiveMax uint16 // the broker's Receive Maximum (CONNACK)

}

// stash holds one connection's set-aside outbound messages.
type stash struct {
	// msgs is touched only by the client's read goroutine (OnDisconnect
	// runs there too).
	msgs map[uint16]packets.Packet
	// qos2In holds the identifiers of inbound QoS 2 messages awaiting
	// PUBREL (read goroutine only), to enforce Receive Maximum.
	qos2In map[uint16]struct{}
	// pending counts msgs; a new connection of the same client waits
	// (briefly) for it to reach 0 before it inherits the session.
	pending *counter
}

// restoreWait bounds how long a new connection waits for the previous
// connection of its client to put set-aside messages back.
const restoreWait = time.Second

func newPacketIDHook(e *Engine) *packetIDHook {
	return &packetIDHook{e: e, receiveMax: e.srv.Options.Capabilities.ReceiveMaximum}
}

func (h *packetIDHook) ID() string { return "iotq-packet-ids" }

func (h *packetIDHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{
		mqttcore.OnSessionEstablish,
		mqttcore.OnSessionEstablished,
		mqttcore.OnDisconnect,
		mqttcore.OnPacketRead,
		mqttcore.OnPacketProcessed,
	}, b) >= 0
}

func (h *packetIDHook) stashOf(cl *mqttcore.Client) *stash {
	s, _ := cl.Attached(slotPacketIDs).(*stash)
	return s
}

func (h *packetIDHook) OnPacketRead(cl *mqttcore.Client, pk packets.Packet) (packets.Packet, error) {
	if err := h.receiveMaximum(cl, pk); err != nil {
		return pk, err
	}
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos != 2 {
		return pk, nil
	}
	out, ok := cl.State.Inflight.Get(pk.PacketID)
	if !ok || out.FixedHeader.Type == packets.Pubrec {
		return pk, nil // free, or inbound QoS 2 state (mochi handles that)
	}
	if s := h.stashOf(cl); s != nil {
		if s.msgs == nil {
			s.msgs = map[uint16]packets.Packet{}
		}
		if _, dup := s.msgs[pk.PacketID]; !dup {
			s.pending.add(1)
		}
		s.msgs[pk.PacketID] = out
	}
	return pk, nil
}

func (h *packetIDHook) OnPacketProcessed(cl *mqttcore.Client, pk packets.Packet, err error) {
	if pk.FixedHeader.Type != packets.Pubrel { // the end of an inbound QoS 2 exchange
		return
	}
	if s := h.stashOf(cl); s != nil && len(s.msgs) > 0 {
		h.restore(cl, s, pk.PacketID)
	}
}

// receiveMaximum enforces the broker's Receive Maximum on an MQTT 5 client:
// one QoS 2 PUBLISH more than the broker announced in CONNACK, while the
// earlier ones still wait for their PUBREL, ends the connection with
// DISCONNECT 0x93 "receive maximum exceeded" [MQTT-3.3.4-9]. (mochi counts
// a quota but never enforces it. QoS 1 messages are acknowledged at once,
// so they never pile up.)
func (h *packetIDHook) receiveMaximum(cl *mqttcore.Client, pk packets.Packet) error {
	if cl.Properties.ProtocolVersion < 5 {
		return nil
	}
	switch {
	case pk.FixedHeader.Type == packets.Pubrel:
		if s := h.stashOf(cl); s != nil {
			delete(s.qos2In, pk.PacketID)
		}
	case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 2:
		s := h.stashOf(cl)
		if s == nil {
			return nil
		}
		if _, ok := s.qos2In[pk.PacketID]; ok {
			return nil // a resend
		}
		if len(s.qos2In) >= int(h.receiveMax) {
			disconnectLingering(cl, packets.ErrReceiveMaximum)
			return packets.ErrRejectPacket
		}
		if s.qos2In == nil {
			s.qos2In = map[uint16]struct{}{}
		}
		s.qos2In[pk.PacketID] = struct{}{}
	}
	return nil
}

// A connection ended by the broker is drained until the client has been
// quiet for lingerIdle, for at most lingerMax in all.
const (
	lingerIdle = time.Second
	lingerMax  = 10 * time.Second
)

// disconnectLingering sends DISCONNECT with code and reads (discarding)
// what the client still sends, until it has been quiet for lingerIdle (at
// most lingerMax), before the engine closes the connection: closing a
// socket with unread data sends a TCP reset, which can destroy the
// DISCONNECT before the client reads it. A client still answering what the
// broker sent before (the Paho suite's test_flow_control2 answers 1024
// PUBRECs with PUBRELs before it reads the DISCONNECT, which took longer
// than a fixed second on a loaded machine) is not cut off mid-answer.
// Read goroutine only.
func disconnectLingering(cl *mqttcore.Client, code packets.Code) {
	_ = cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ReasonCode: code.Code,
		Properties: packets.Properties{ReasonString: code.Reason}})
	c := cl.Net.Conn
	if c == nil {
		return
	}
	end := time.Now().Add(lingerMax)
	buf := make([]byte, 4096)
	for {
		deadline := time.Now().Add(lingerIdle)
		if deadline.After(end) {
			deadline = end
		}
		_ = c.SetReadDeadline(deadline)
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// restore puts the set-aside outbound message with identifier id back.
// Read goroutine only.
func (h *packetIDHook) restore(cl *mqttcore.Client, s *stash, id uint16) {
	out, ok := s.msgs[id]
	if !ok {
		return
	}
	delete(s.msgs, id)
	if cl.State.Inflight.Set(out) {
		atomic.AddInt64(&h.e.srv.Info.Inflight, 1)
	}
	if h.e.store != nil {
		h.e.store.OnQosPublish(cl, out, out.Created, 0)
	}
	s.pending.add(-1)
}

// OnSessionEstablish runs on a new connection's goroutine just before it
// inherits the session of an earlier connection with the same client
// identifier. The earlier connection restores set-aside messages right
// after writing its last acknowledgement, and the client may reconnect
// within that instant: wait (notified, at most restoreWait) for the
// restore, so the new connection inherits the messages.
func (h *packetIDHook) OnSessionEstablish(cl *mqttcore.Client, pk packets.Packet) {
	old, ok := h.e.srv.Clients.Get(cl.ID)
	if !ok || old == cl {
		return
	}
	if s := h.stashOf(old); s != nil {
		s.pending.waitZero(restoreWait)
	}
}

func (h *packetIDHook) OnSessionEstablished(cl *mqttcore.Client, pk packets.Packet) {
	cl.Attach(slotPacketIDs, &stash{pending: newCounter()})
}

func (h *packetIDHook) OnDisconnect(cl *mqttcore.Client, err error, expire bool) {
	s := h.stashOf(cl)
	if s == nil {
		return
	}
	// Exchanges cut short (invalid PUBLISH, no PUBREL): keep the messages
	// in the session.
	if !expire {
		for id := range s.msgs {
			h.restore(cl, s, id)
		}
	}
	cl.Attach(slotPacketIDs, nil)
}
