package broker

// Early-data policies of quic:// listeners (QUICOptions.EarlyData); what
// each guarantees: docs/0rtt.md.
const (
	// EarlyAccept processes everything that arrives as 0-RTT data at once:
	// a replayed first flight is processed again, PUBLISHes included.
	EarlyAccept = "accept"
	// EarlyHold processes the first MQTT packet (CONNECT) at once and
	// everything after it only once the QUIC handshake has completed, so
	// a replayed first flight never delivers a PUBLISH (its CONNECT still
	// takes effect).
	EarlyHold = "hold"
	// EarlyRefuse refuses 0-RTT: clients complete a full handshake first.
	EarlyRefuse = "refuse"
)

// mqttFirstPacketLen is a transport.FirstMessageFunc for MQTT: the length
// of the first packet is its fixed header (type byte and 1 to 4 bytes of
// remaining length) plus the remaining length. A remaining length longer
// than 4 bytes is invalid: the prefix itself is the "packet", everything
// after it is held, and the engine rejects the prefix.
func mqttFirstPacketLen(prefix []byte) (total, more int) {
	if len(prefix) < 2 {
		return 0, 2 - len(prefix)
	}
	n, mult := 0, 1
	for i := 1; i < len(prefix) && i <= 4; i++ {
		d := prefix[i]
		n += int(d&0x7f) * mult
		if d&0x80 == 0 {
			return 1 + i + n, 0
		}
		mult *= 128
	}
	if len(prefix) >= 5 {
		return len(prefix), 0
	}
	return 0, 1
}
