package records

// FileE11 is the per-repetition result of E11, the lab's failover
// experiment (cells/CELL/rep-N/e11.csv; docs/records.md).
const FileE11 = "e11.csv"

// E11Row is one repetition of an E11 cell: what the publisher's records
// and the subscriber's say about the failover. Times in ns; an empty
// (0) time did not happen.
type E11Row struct {
	Cell       string  `csv:"cell"`
	Experiment string  `csv:"experiment"`
	Rep        int     `csv:"rep"`
	Transport  string  `csv:"transport"`
	Profile    string  `csv:"profile"`
	LossPct    float64 `csv:"loss_pct"`
	// LinkRTTNs is the round trip of the publisher's emulated link.
	LinkRTTNs int64 `csv:"link_rtt_ns"`
	// Sent: messages the publishers handed to the client library;
	// Acknowledged: of those, PUBACKed; Lost: acknowledged, never at the
	// subscriber (must be 0); Duplicated: receipts beyond the first of a
	// message; UnackedDelivered: delivered though never acknowledged (in
	// flight at the kill).
	Sent             int `csv:"sent"`
	Acknowledged     int `csv:"acknowledged"`
	Delivered        int `csv:"delivered"`
	Lost             int `csv:"lost"`
	Duplicated       int `csv:"duplicated"`
	UnackedDelivered int `csv:"unacked_delivered"`
	// KillNs: when the node was killed; KilledNode its name; KillTarget
	// "publisher" when the lab found the publisher's connection on it (NATS
	// /connz), "assumed" when it fell back to the node it dialled.
	KillNs     int64  `csv:"kill_ns"`
	KilledNode string `csv:"killed_node"`
	KillTarget string `csv:"kill_target"`
	// GapNs: from the last delivery before the kill to the first delivery
	// of a message sent after it. RecoverNs: from the kill to the first
	// acknowledgement of a message sent after it (the publisher publishes
	// again).
	GapNs     int64 `csv:"gap_ns"`
	RecoverNs int64 `csv:"recover_ns"`
	// Connections: publisher processes (one connection each); Reconnects0RTT
	// and ReconnectsResumed: of the connections after the first, those that
	// used QUIC 0-RTT or resumed TLS.
	Connections       int    `csv:"connections"`
	Reconnects0RTT    int    `csv:"reconnects_0rtt"`
	ReconnectsResumed int    `csv:"reconnects_resumed"`
	NATSVersion       string `csv:"nats_version"`
}
