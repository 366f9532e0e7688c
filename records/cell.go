package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LinkParams are the resolved parameters of one emulated link (both
// directions alike), as the lab records them.
type LinkParams struct {
	// Name is the profile or sub-link name.
	Name string `json:"name"`
	// RateBps is the rate in bit/s; 0 means unlimited.
	RateBps int64 `json:"rate_bps"`
	// DelayNs is the one-way propagation delay per direction.
	DelayNs int64 `json:"delay_ns"`
	// LossPct is the random loss (or, on a shared medium, the frame error
	// rate) per packet, in percent.
	LossPct float64 `json:"loss_pct"`
	// QueueBytes limits the queue; 0 means one bandwidth-delay product.
	QueueBytes int `json:"queue_bytes"`
	// Direction says which direction carries the impairment (delay, loss,
	// rate), seen from the link's edge node (the publisher or subscriber;
	// the other end is the broker): "" or DirectionBoth, DirectionEgress
	// (the edge node's outgoing packets only, as traffic control on a
	// device's interface shapes them) or DirectionIngress. The other
	// direction is clean.
	Direction string `json:"direction,omitempty"`
	// BurstLen, when positive, makes the random loss bursty: a
	// Gilbert-Elliott model (link.GEBursts) whose mean loss is LossPct and
	// whose loss bursts are BurstLen packets long on average. Zero:
	// independent loss per packet.
	BurstLen float64 `json:"burst_len,omitempty"`
	// Trace, when set, names the packet-delivery trace (a built-in of
	// link/trace or a file, Mahimahi's format) that sets the link's rate
	// instead of RateBps, which is then 0.
	Trace string `json:"trace,omitempty"`
}

// Impairment directions of LinkParams.Direction.
const (
	DirectionBoth    = "both"
	DirectionEgress  = "egress"
	DirectionIngress = "ingress"
)

// OneDirection reports whether only one direction of the link is impaired.
func (l LinkParams) OneDirection() bool {
	return l.Direction == DirectionEgress || l.Direction == DirectionIngress
}

// RTT is the round trip the link adds: twice its delay, or the delay once
// when only one direction is impaired.
func (l LinkParams) RTT() time.Duration {
	if l.OneDirection() {
		return l.Delay()
	}
	return 2 * l.Delay()
}

// Delay returns the one-way delay.
func (l LinkParams) Delay() time.Duration { return time.Duration(l.DelayNs) }

// Cell is one point of a campaign: a single combination of link,
// transport and traffic parameters, run Repetitions times. The lab writes
// it into every cell's done.json.
type Cell struct {
	ID          string  `json:"cell"`
	Experiment  string  `json:"experiment"`
	Profile     string  `json:"profile"`
	LossPct     float64 `json:"loss_pct"`
	Transport   string  `json:"transport"`
	QoS         int     `json:"qos"`
	Size        int     `json:"size"`
	Pattern     string  `json:"pattern"`
	IntervalNs  int64   `json:"interval_ns"`
	Messages    int     `json:"messages"`
	Repetitions int     `json:"repetitions"`
	// Topology kind and, for a shared medium, publishers and retries.
	Kind       string `json:"topology"`
	Publishers int    `json:"publishers"`
	Retries    int    `json:"retries"`
	// DelayConvention is how the profile's delay figure was read
	// (DelayOneWay or DelayRTT).
	DelayConvention string `json:"delay_convention"`
	// PubLink is the publisher's link (on a shared medium: the medium);
	// SubLink the broker-subscriber link.
	PubLink       LinkParams `json:"pub_link"`
	SubLink       LinkParams `json:"sub_link"`
	TCPCongestion string     `json:"tcp_congestion"`
	Seed          int64      `json:"seed"`
	GraceNs       int64      `json:"grace_ns"`
	// Protocol is the application protocol of Transport (ProtocolMQTT,
	// ProtocolAMQP, ProtocolCoAP); empty in cells written before version 2,
	// which were all MQTT (see ProtocolName).
	Protocol string `json:"protocol,omitempty"`
	// QUIC0RTT (version 3) is the broker's QUIC 0-RTT policy in MQTT over
	// QUIC cells (Early*: accept, hold, refuse; docs/0rtt.md); empty for
	// other transports and in older cells (whose brokers ran hold).
	QUIC0RTT EarlyPolicy `json:"quic_0rtt,omitempty"`
	// QUICStreams (version 5) is the clients' stream strategy in MQTT over
	// QUIC cells (control, per-topic, per-publish, with "+datagrams" when
	// QoS 0 goes as QUIC datagrams; docs/mqtt-quic.md); empty for other
	// transports and in older cells, whose clients used one stream.
	QUICStreams string `json:"quic_streams,omitempty"`
	// PathChange (pattern path-change, E10) is what happens to the
	// publisher's path ChangeAtNs after the publisher started:
	// PathChangeRebind or PathChangeWifiToCellular; empty otherwise.
	PathChange string `json:"path_change,omitempty"`
	// Reconnect (version 6): the periodic pattern's publishers dialled
	// again when their connection was lost (`iotq pub --reconnect`)
	// instead of ending the cell; connections.csv counts the reconnects.
	Reconnect  bool  `json:"reconnect,omitempty"`
	ChangeAtNs int64 `json:"change_at_ns,omitempty"`
	// ChangeLink is the publisher's link after a PathChangeWifiToCellular
	// change (the cellular profile under the cell's delay convention,
	// with the cell's loss); nil otherwise.
	ChangeLink *LinkParams `json:"change_link,omitempty"`
	// Topics (version 7, pattern multi-topic, E9) is the number of
	// periodic topics the publisher sends on over its one connection
	// (TOPIC/0 ... TOPIC/N-1, each Messages messages every Interval, their
	// phases spread over the interval); 0 for the other patterns.
	Topics int `json:"topics,omitempty"`
	// LargeSize and LargeIntervalNs (version 7, pattern multi-topic) are
	// the large-message topic beside them (TOPIC/large: one message of
	// LargeSize bytes every LargeIntervalNs while the periodic topics
	// run); 0 when the cell has none.
	LargeSize       int   `json:"large_size,omitempty"`
	LargeIntervalNs int64 `json:"large_interval_ns,omitempty"`
}

// LargeInterval returns the large-message topic's interval.
func (c Cell) LargeInterval() time.Duration { return time.Duration(c.LargeIntervalNs) }

// Path changes of pattern path-change (Cell.PathChange).
const (
	// PathChangeRebind: the NAT in front of the publisher rebinds (every
	// flow gets a new external port); the link stays as it was.
	PathChangeRebind = "rebind"
	// PathChangeWifiToCellular: the publisher's link switches from the
	// wifi profile's delay and rate to the cellular profile's, and its
	// NAT rebinds at the same instant (a new address on the new network).
	PathChangeWifiToCellular = "wifi-to-cellular"
)

// ProtocolName is the cell's protocol, ProtocolMQTT for cells written
// before the protocol was recorded (records version 0 and 1).
func (c Cell) ProtocolName() string { return ProtocolOr(c.Protocol) }

// ProtocolOr returns p, or ProtocolMQTT when p is empty: directories written
// before records version 2 hold MQTT cells only.
func ProtocolOr(p string) string {
	if p == "" {
		return ProtocolMQTT
	}
	return p
}

// Interval returns the publish interval.
func (c Cell) Interval() time.Duration { return time.Duration(c.IntervalNs) }

// PathDelay is the one-way propagation delay from publisher to subscriber:
// the physical lower bound of a message's one-way delay.
func (c Cell) PathDelay() time.Duration { return c.PubLink.Delay() + c.SubLink.Delay() }

// PathRTT is the round trip publisher-broker plus broker-subscriber.
func (c Cell) PathRTT() time.Duration { return c.PubLink.RTT() + c.SubLink.RTT() }

// Cell statuses in done.json and cells.csv.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Done is a cell's done marker (DIR/cells/CELL/done.json): the cell and its
// outcome. A cell is finished when the file exists.
type Done struct {
	Cell      Cell   `json:"cell"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	Published int    `json:"published"`
	Delivered int    `json:"delivered"`
	RepsOK    int    `json:"reps_ok"`
	// Timing (version 4) is the cell's timing record: its publishers'
	// send lateness and the host probe while it ran; absent in older
	// cells and when the campaign ran without a timing guard.
	Timing *CellTiming `json:"timing,omitempty"`
}

// ReadDone reads CELLDIR/done.json; ok is false when it is absent.
func ReadDone(cellDir string) (d Done, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(cellDir, FileDone))
	if errors.Is(err, os.ErrNotExist) {
		return Done{}, false, nil
	}
	if err != nil {
		return Done{}, false, fmt.Errorf("read done marker: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return Done{}, false, fmt.Errorf("%s: corrupt done marker (delete the cell directory to rerun it): %w", cellDir, err)
	}
	return d, true, nil
}

// Vocabulary of the records: the values the lab writes in the pattern,
// role, node, link and topology columns. Readers compare with these, never
// with substrings.
const (
	PatternPeriodic    = "periodic"      // publish every interval
	PatternStopAndWait = "stop-and-wait" // pattern A: message i+1 only after the subscriber got i
	PatternReconnect   = "reconnect"     // pattern B: connect, publish, exit; reconnect with resumption, publish
	// PatternReconnectEarly (version 3) is pattern B whose resumed
	// publisher writes its first PUBLISH (QoS 1) in the same write as
	// CONNECT: over QUIC in the 0-RTT flight, over TCP+TLS right after the
	// TLS handshake, without waiting for CONNACK.
	PatternReconnectEarly = "reconnect-early"
	// PatternBatch: per repetition a fresh connection sends Messages
	// back to back (E8); PatternBatchResume: the same, resuming the
	// previous repetition's TLS session or QUIC 0-RTT ticket.
	PatternBatch       = "batch"
	PatternBatchResume = "batch-resume"
	// PatternBatchEcho: PatternBatch whose receiver publishes each message
	// back, received on the sender's node by a second connection
	// (RoleEcho): Message.EchoNs, the round trip sender-receiver-sender.
	PatternBatchEcho = "batch-echo"
	// PatternClosedLoop (E7): the publisher sends Messages on one
	// connection, each only after the previous one's receipt completed
	// (acknowledged or failed); a failed one is recorded as lost.
	PatternClosedLoop = "closed-loop"
	// PatternPathChange (E10): a paced QoS 1 stream whose publisher's path
	// changes at Cell.ChangeAtNs (Cell.PathChange); the publisher
	// reconnects when its connection dies (`iotq pub --reconnect`).
	PatternPathChange = "path-change"
	// PatternMultiTopic (version 7, E9): one publisher connection sends
	// on Cell.Topics periodic topics and, optionally, a large-message
	// topic (`iotq pub --topics N --large-size B --large-interval D`);
	// the subscriber takes them all with TOPIC/#.
	PatternMultiTopic = "multi-topic"
	// TopicLarge is the last level of the large-message topic of pattern
	// multi-topic (TOPIC/large); the periodic topics end in their index
	// (TOPIC/0, TOPIC/1, ...).
	TopicLarge = "large"

	ProtocolMQTT = "mqtt" // application protocols (the protocol columns)
	ProtocolAMQP = "amqp"
	ProtocolCoAP = "coap"

	NodePub    = "pub" // the measured publisher; others of a shared medium are pub2, pub3...
	NodeBroker = "broker"
	NodeSub    = "sub"

	RolePub           = "pub"            // the measured publisher's (first) connection
	RolePubResume     = "pub-resume"     // pattern B: its second, resumed connection
	RolePubBackground = "pub-background" // the other publishers of a shared medium
	RoleSub           = "sub"
	RoleBroker        = "broker"
	RoleEcho          = "echo" // batch-echo: the sender node's subscriber to the echoes

	LinkPub    = "pub"    // publisher-broker link (pub-broker-sub)
	LinkMedium = "medium" // the shared medium of the publishers (shared-medium)
	LinkSub    = "sub"    // broker-subscriber link

	KindPubBrokerSub = "pub-broker-sub"
	KindSharedMedium = "shared-medium"

	DelayOneWay = "one-way" // a profile's delay figure is one-way
	DelayRTT    = "rtt"     // it is a round trip: each direction gets half
)

// EarlyPolicy is what a QUIC server does with 0-RTT data (the data that
// rides behind the first message in a resumed client's first flight, and
// that an attacker can replay): the broker's quic:// listeners
// (`iotq broker --quic-0rtt`, broker.QUICOptions.EarlyData), the
// gateway's routes (gateway.Route.EarlyData) and the lab's cells
// (Cell.QUIC0RTT). This is its one home; what each value guarantees:
// docs/0rtt.md.
type EarlyPolicy string

// The values of EarlyPolicy.
const (
	// EarlyAccept processes everything that arrives as 0-RTT data at once:
	// a replayed first flight is processed again, PUBLISHes included.
	EarlyAccept EarlyPolicy = "accept"
	// EarlyHold processes the first message (MQTT CONNECT, the AMQP
	// header, the CoAP CSM) at once and everything after it only once the
	// QUIC handshake has completed, so a replayed first flight never
	// delivers a PUBLISH (its CONNECT still takes effect). The broker's
	// default.
	EarlyHold EarlyPolicy = "hold"
	// EarlyRefuse refuses 0-RTT: clients complete a full handshake first.
	EarlyRefuse EarlyPolicy = "refuse"
	// EarlyALPN (gateway routes only, their default) accepts 0-RTT when
	// the negotiated ALPN is one of the route's early_data_alpn and
	// refuses it otherwise.
	EarlyALPN EarlyPolicy = "alpn"
)

// IsLargeTopic reports whether topic is the large-message topic of
// pattern multi-topic (its last level is TopicLarge).
func IsLargeTopic(topic string) bool {
	return topic == TopicLarge || strings.HasSuffix(topic, "/"+TopicLarge)
}

// IsReconnectPattern reports whether p is pattern B (a resumed start):
// reconnect or reconnect-early.
func IsReconnectPattern(p string) bool {
	return p == PatternReconnect || p == PatternReconnectEarly
}

// IsPublisherRole reports whether role is a publishing process's.
func IsPublisherRole(role string) bool {
	return role == RolePub || role == RolePubResume || role == RolePubBackground
}

// IsQUIC reports whether a transport (a URL scheme such as mqtts, quic,
// coap+quic) runs over QUIC.
func IsQUIC(transport string) bool {
	return transport == "quic" || strings.HasSuffix(transport, "+quic")
}

// LinkFrom returns the node a direction ("FROM->TO") starts at.
func LinkFrom(direction string) string {
	from, _, _ := strings.Cut(direction, "->")
	return from
}

// IsPublisherNode reports whether node is a publisher's: "pub", or "pubN"
// on a shared medium.
func IsPublisherNode(node string) bool {
	rest, ok := strings.CutPrefix(node, NodePub)
	if !ok {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
