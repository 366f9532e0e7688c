package records

// Rows of the files that the node processes write (DIR/cells/CELL/rep-N/).

// PubRecord is one row of `iotq pub --records FILE`: one published
// message. SendNs is taken just before the client library is handed the
// message and is the send time in the payload header; AcceptedNs is the
// receipt time (PUBACK/PUBCOMP for QoS 1/2, handed to the transport for
// QoS 0), 0 when the message was not accepted.
type PubRecord struct {
	Seq        int64  `csv:"seq"`
	Size       int    `csv:"size"`
	SendNs     int64  `csv:"send_ns"`
	AcceptedNs int64  `csv:"accepted_ns"`
	OK         bool   `csv:"ok"`
	Error      string `csv:"error"`
	// Topic (version 7) is the topic the message was published on: with
	// `iotq pub --topics N` the publisher's messages spread over several
	// topics (their seq counts across all of them); empty in older files.
	Topic string `csv:"topic"`
	// ReadyNs (version 8) is when a paced message could leave at the
	// earliest: its due time, or the return of the previous hand-over on
	// the same publishing goroutine if that came later (a large message
	// or a full stream blocks the client). SendNs-ReadyNs is the
	// publisher's scheduling delay alone, the host's share of its send
	// lateness; 0 when not paced and in older files.
	ReadyNs int64 `csv:"ready_ns,omitzero"`
}

// SubRecord is one row of `iotq sub --records FILE`: one received message
// that carries a measurement header. Duplicate: the same topic and seq
// arrived before.
type SubRecord struct {
	Seq       int64  `csv:"seq"`
	Size      int    `csv:"size"`
	SendNs    int64  `csv:"send_ns"`
	RecvNs    int64  `csv:"recv_ns"`
	DelayNs   int64  `csv:"delay_ns"`
	Topic     string `csv:"topic"`
	QoS       int    `csv:"qos"`
	Duplicate bool   `csv:"duplicate"`
}

// Rows of the files that the lab writes per cell (DIR/cells/CELL/) and
// concatenates into the results directory (DIR/).

// Message is one row of messages.csv: one published message. RecvNs and
// DelayNs are empty (0) when the message never arrived.
type Message struct {
	Cell      string `csv:"cell"`
	Rep       int    `csv:"rep"`
	Protocol  string `csv:"protocol"`
	Transport string `csv:"transport"`
	QoS       int    `csv:"qos"`
	Seq       int64  `csv:"seq"`
	Size      int    `csv:"size"`
	SendNs    int64  `csv:"send_ns"`
	RecvNs    int64  `csv:"recv_ns,omitzero"`
	DelayNs   int64  `csv:"delay_ns,omitzero"`
	Node      string `csv:"node"`
	Topic     string `csv:"topic"`
	// AcceptedNs is the publisher's receipt time (PubRecord.AcceptedNs:
	// PUBACK/PUBCOMP, the AMQP accepted disposition, the CoAP ACK); empty
	// before version 2 and when the message was never acknowledged.
	AcceptedNs int64 `csv:"accepted_ns,omitzero"`
	// EchoNs (pattern batch-echo) is when the receiver's echo of the
	// message arrived back at the sender's node; empty otherwise.
	EchoNs int64 `csv:"echo_ns,omitzero"`
}

// EchoRTT is the round trip sender -> receiver -> sender (echo_ns -
// send_ns), 0 when there was no echo.
func (m Message) EchoRTT() int64 {
	if m.EchoNs <= 0 || m.SendNs <= 0 || m.EchoNs < m.SendNs {
		return 0
	}
	return m.EchoNs - m.SendNs
}

// AckRTT is the round trip from the send to the broker's acknowledgement
// (accepted_ns - send_ns), 0 when either is missing.
func (m Message) AckRTT() int64 {
	if m.AcceptedNs <= 0 || m.SendNs <= 0 || m.AcceptedNs < m.SendNs {
		return 0
	}
	return m.AcceptedNs - m.SendNs
}

// Connection is one row of connections.csv: one client connection. Times
// the client did not report are empty (0).
type Connection struct {
	Cell             string `csv:"cell"`
	Rep              int    `csv:"rep"`
	Role             string `csv:"role"`
	Node             string `csv:"node"`
	Transport        string `csv:"transport"`
	DialStartNs      int64  `csv:"dial_start_ns,omitzero"`
	TransportReadyNs int64  `csv:"transport_ready_ns,omitzero"`
	ConnackNs        int64  `csv:"connack_ns,omitzero"`
	FirstDeliveryNs  int64  `csv:"first_delivery_ns,omitzero"`
	Resumed          bool   `csv:"resumed"`
	Used0RTT         bool   `csv:"used_0rtt"`
	// EarlySentNs (version 3) is when a message written with CONNECT
	// (pattern reconnect-early, `iotq pub --early`) left; empty otherwise.
	EarlySentNs int64 `csv:"early_sent_ns,omitzero"`
	// QUICStreamStrategy (version 5) is an MQTT over QUIC client's stream
	// strategy (ConnectionStats.QUICStreamStrategy: control, per-topic,
	// per-publish); empty for other transports and in older files, where
	// QUIC clients used one stream (read it with StreamStrategyOr).
	QUICStreamStrategy string `csv:"quic_stream_strategy"`
	// QUICDatagrams (version 5): the client and the broker negotiated QUIC
	// datagrams (ConnectionStats.QUICDatagrams).
	QUICDatagrams bool `csv:"quic_datagrams"`
	// Reconnects (version 6) counts the connections a reconnecting
	// publisher (`iotq pub --reconnect`) made after the first because one
	// was lost; 0 for other clients.
	Reconnects int `csv:"reconnects,omitzero"`
}

// StreamStrategyOr returns the connection's QUIC stream strategy, "control"
// for an MQTT over QUIC row written before version 5, and "" for other
// transports.
func (c Connection) StreamStrategyOr() string {
	if c.QUICStreamStrategy != "" || c.Transport != "quic" {
		return c.QUICStreamStrategy
	}
	return "control"
}

// LinkCount is one row of links.csv: the emulator's counters of one link
// direction during one repetition. Direction is "FROM->TO" (node names).
type LinkCount struct {
	Cell        string `csv:"cell"`
	Rep         int    `csv:"rep"`
	Link        string `csv:"link"`
	Direction   string `csv:"direction"`
	Packets     int64  `csv:"packets"`
	Bytes       int64  `csv:"bytes"`
	DropRandom  int64  `csv:"drop_random"`
	DropQueue   int64  `csv:"drop_queue"`
	DropRetries int64  `csv:"drop_retries"`
	DropDown    int64  `csv:"drop_down"`
	// DropNAT (E10) counts packets addressed to a port the rebinding NAT
	// in front of the link's edge node no longer maps (link.Step.Rebind).
	DropNAT int64 `csv:"drop_nat"`
}

// Drops sums the drops of every cause.
func (l LinkCount) Drops() int64 {
	return l.DropRandom + l.DropQueue + l.DropRetries + l.DropDown + l.DropNAT
}

// CPU is one row of cpu.csv: the processor time of one node process
// (rep 0: the broker, which lives for the whole cell).
type CPU struct {
	Cell   string `csv:"cell"`
	Rep    int    `csv:"rep"`
	Node   string `csv:"node"`
	Role   string `csv:"role"`
	UserNs int64  `csv:"user_ns"`
	SysNs  int64  `csv:"sys_ns"`
}

// Completion is one row of completions.csv (pattern A, stop-and-wait):
// CompletionNs is EndNs-StartNs when every message arrived, else empty.
type Completion struct {
	Cell         string `csv:"cell"`
	Rep          int    `csv:"rep"`
	Transport    string `csv:"transport"`
	StartNs      int64  `csv:"start_ns,omitzero"`
	EndNs        int64  `csv:"end_ns,omitzero"`
	CompletionNs int64  `csv:"completion_ns,omitzero"`
	Delivered    int    `csv:"delivered"`
	Published    int    `csv:"published"`
}

// CellRow is one row of cells.csv: a cell's parameters and outcome.
type CellRow struct {
	Cell       string  `csv:"cell"`
	Experiment string  `csv:"experiment"`
	Profile    string  `csv:"profile"`
	LossPct    float64 `csv:"loss_pct"`
	Transport  string  `csv:"transport"`
	// Protocol (version 2): empty in older files, read it with ProtocolOr.
	Protocol string `csv:"protocol"`
	// QUIC0RTT (version 3): the broker's QUIC 0-RTT policy in MQTT over
	// QUIC cells (Cell.QUIC0RTT); empty otherwise and in older files.
	QUIC0RTT EarlyPolicy `csv:"quic_0rtt"`
	// QUICStreams (version 5): the clients' QUIC stream strategy in MQTT
	// over QUIC cells (Cell.QUICStreams); empty otherwise and in older
	// files (one stream).
	QUICStreams     string `csv:"quic_streams"`
	QoS             int    `csv:"qos"`
	Pattern         string `csv:"pattern"`
	Size            int    `csv:"size"`
	IntervalNs      int64  `csv:"interval_ns"`
	Messages        int    `csv:"messages"`
	Repetitions     int    `csv:"repetitions"`
	Topology        string `csv:"topology"`
	Publishers      int    `csv:"publishers"`
	Retries         int    `csv:"retries"`
	DelayConvention string `csv:"delay_convention"`
	PubLink         string `csv:"pub_link"`
	PubRateBps      int64  `csv:"pub_rate_bps"`
	PubDelayNs      int64  `csv:"pub_delay_ns"`
	SubLink         string `csv:"sub_link"`
	SubRateBps      int64  `csv:"sub_rate_bps"`
	SubDelayNs      int64  `csv:"sub_delay_ns"`
	PathDelayNs     int64  `csv:"path_delay_ns"`
	TCPCongestion   string `csv:"tcp_congestion"`
	Seed            int64  `csv:"seed"`
	Published       int    `csv:"published"`
	Delivered       int    `csv:"delivered"`
	RepsOK          int    `csv:"reps_ok"`
	Status          string `csv:"status"`
	Error           string `csv:"error"`
	StartNs         int64  `csv:"start_ns"`
	EndNs           int64  `csv:"end_ns"`
	// Topics, LargeSize and LargeIntervalNs (version 7; pattern
	// multi-topic, Cell.Topics): 0 for the other patterns and in older
	// files.
	Topics          int   `csv:"topics"`
	LargeSize       int   `csv:"large_size"`
	LargeIntervalNs int64 `csv:"large_interval_ns"`
}

// Row turns a cell's done marker into its cells.csv row.
func (d Done) Row() CellRow {
	c := d.Cell
	return CellRow{Cell: c.ID, Experiment: c.Experiment, Profile: c.Profile, LossPct: c.LossPct, Transport: c.Transport,
		QoS: c.QoS, Pattern: c.Pattern, Size: c.Size, IntervalNs: c.IntervalNs, Messages: c.Messages,
		Repetitions: c.Repetitions, Topology: c.Kind, Publishers: c.Publishers, Retries: c.Retries,
		DelayConvention: c.DelayConvention, PubLink: c.PubLink.Name, PubRateBps: c.PubLink.RateBps,
		PubDelayNs: c.PubLink.DelayNs, SubLink: c.SubLink.Name, SubRateBps: c.SubLink.RateBps,
		SubDelayNs: c.SubLink.DelayNs, PathDelayNs: int64(c.PathDelay()), TCPCongestion: c.TCPCongestion,
		Seed: c.Seed, Published: d.Published, Delivered: d.Delivered, RepsOK: d.RepsOK, Status: d.Status,
		Error: d.Error, StartNs: d.StartNs, EndNs: d.EndNs, Protocol: c.ProtocolName(), QUIC0RTT: c.QUIC0RTT, QUICStreams: c.QUICStreams,
		Topics: c.Topics, LargeSize: c.LargeSize, LargeIntervalNs: c.LargeIntervalNs}
}
