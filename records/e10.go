package records

// FileE10 is the per-repetition result of E10, the lab's path-change
// experiment (cells/CELL/rep-N/e10.csv; docs/records.md).
const FileE10 = "e10.csv"

// E10Row is one repetition of an E10 cell (pattern path-change): what the
// publisher's records, its --stats json, the subscriber's records and the
// emulator's counters say about the change. Times in ns; 0 means it did
// not happen (or could not be measured).
type E10Row struct {
	Cell       string  `csv:"cell"`
	Experiment string  `csv:"experiment"`
	Rep        int     `csv:"rep"`
	Transport  string  `csv:"transport"`
	PathChange string  `csv:"path_change"` // PathChangeRebind, PathChangeWifiToCellular
	Profile    string  `csv:"profile"`
	LossPct    float64 `csv:"loss_pct"`
	// LinkRTTNs is the round trip of the publisher's link before the
	// change, ChangeLinkRTTNs after it (the same for a rebind).
	LinkRTTNs       int64 `csv:"link_rtt_ns"`
	ChangeLinkRTTNs int64 `csv:"change_link_rtt_ns"`
	// ChangeNs is when the lab changed the path (Unix ns), ChangeAtNs how
	// long after the publisher's start it was meant to.
	ChangeNs   int64 `csv:"change_ns"`
	ChangeAtNs int64 `csv:"change_at_ns"`
	// Sent: messages the publisher published (each once, however often
	// resent); Acknowledged: of those, acknowledged in the end; Delivered:
	// distinct messages at the subscriber; Lost: sent, never delivered;
	// Duplicated: receipts beyond the first of a message.
	Sent         int `csv:"sent"`
	Acknowledged int `csv:"acknowledged"`
	Delivered    int `csv:"delivered"`
	Lost         int `csv:"lost"`
	Duplicated   int `csv:"duplicated"`
	// GapNs is the longest time between two consecutive receipts at the
	// subscriber, the later one after the change; GapBeforeNs the same
	// before the change (what the stream's own spacing gives).
	GapNs       int64 `csv:"gap_ns"`
	GapBeforeNs int64 `csv:"gap_before_ns"`
	// FirstAfterNs: from the change to the first receipt of a message sent
	// after it.
	FirstAfterNs int64 `csv:"first_after_ns"`
	// Reconnects: new connections the publisher made (iotq pub
	// --reconnect), ReconnectNs the time from noticing the first loss to
	// its new connection's CONNACK, Resent the messages published again,
	// ReconnectResumed whether the first new connection resumed TLS.
	Reconnects       int   `csv:"reconnects"`
	ReconnectNs      int64 `csv:"reconnect_ns"`
	Resent           int   `csv:"resent"`
	ReconnectResumed bool  `csv:"reconnect_resumed"`
	// DropNAT counts the packets of the publisher's link the rebinding NAT
	// dropped (addressed to a retired port) during the repetition.
	DropNAT int64 `csv:"drop_nat"`
}
