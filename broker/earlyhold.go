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
