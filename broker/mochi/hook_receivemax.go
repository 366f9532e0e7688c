package mochi

import (
	"time"

	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// receiveMaxHook enforces the broker's Receive Maximum on an MQTT 5 client:
// a QoS 2 PUBLISH that would open one exchange more than the broker
// announced in CONNACK, while the earlier ones still wait for their
// PUBREL, ends the connection with DISCONNECT 0x93 "receive maximum
// exceeded" [MQTT-3.3.4-9]. The engine decides
// (Client.ReceiveMaximumExceededBy, engine patch 56) and would close the
// connection at once; this hook answers first and lets the client read
// the DISCONNECT (disconnectLingering). QoS 1 messages are acknowledged
// at once, so they never pile up.
type receiveMaxHook struct {
	mqttcore.HookBase
}

func (h *receiveMaxHook) ID() string { return "iotq-receive-maximum" }

func (h *receiveMaxHook) Provides(b byte) bool { return b == mqttcore.OnPacketRead }

func (h *receiveMaxHook) OnPacketRead(cl *mqttcore.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Properties.ProtocolVersion < 5 || pk.FixedHeader.Type != packets.Publish || !cl.ReceiveMaximumExceededBy(pk) {
		return pk, nil
	}
	disconnectLingering(cl, packets.ErrReceiveMaximum)
	return pk, packets.ErrRejectPacket
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
