package records

import (
	"bytes"
	"encoding/json"
	"os"
	"time"

	"github.com/iotq/iotq/internal/stats"
)

// ConnectionStats are the connection facts in the stats JSON of
// `iotq pub|sub --stats json`. Times are Unix ns (0: not reached);
// dial_ms is the wall time of the whole connect call, transport_ready_ms
// and connack_ms count from dial_start (for CoAP "connack" is the answer
// to the first ping, docs/coap.md). Facts a protocol does not have are
// left out: client_id for CoAP, session_present for all but MQTT.
type ConnectionStats struct {
	URL              string  `json:"url"`
	Transport        string  `json:"transport"`
	Protocol         string  `json:"protocol"`
	ClientID         string  `json:"client_id,omitempty"`
	Used0RTT         bool    `json:"used_0rtt"`
	TLSResumed       bool    `json:"tls_resumed"`
	Rejected0RTT     bool    `json:"rejected_0rtt"`
	SessionPresent   *bool   `json:"session_present,omitempty"` // MQTT only
	DialStartNs      int64   `json:"dial_start_ns"`
	TransportReadyNs int64   `json:"transport_ready_ns"`
	ConnackNs        int64   `json:"connack_ns"`
	DialMs           float64 `json:"dial_ms"`
	TransportReadyMs float64 `json:"transport_ready_ms"`
	ConnackMs        float64 `json:"connack_ms"`
	EarlySentNs      int64   `json:"early_sent_ns,omitempty"`
	// QUICStreamStrategy (MQTT over QUIC only; empty in older output and
	// for other transports, which read as "control") is the client's
	// stream strategy: control, per-topic or per-publish
	// (docs/mqtt-quic.md); QUICDatagrams says both ends negotiated QUIC
	// datagrams.
	QUICStreamStrategy string `json:"quic_stream_strategy,omitempty"`
	QUICDatagrams      bool   `json:"quic_datagrams,omitempty"`
	// QUIC holds the QUIC connection's counters (transport.QUICStats) on a
	// QUIC transport.
	QUIC any `json:"quic,omitempty"`
}

// UnixNs returns t in Unix ns, 0 for the zero time.
func UnixNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// MsBetween returns b-a in ms, 0 when either is the zero time.
func MsBetween(a, b time.Time) float64 {
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return float64(b.Sub(a).Nanoseconds()) / 1e6
}

// PubStats is the one JSON object of `iotq pub --stats json`: the
// connection facts at the top level, once (earlier versions repeated them
// under "connection", which ReadConnectionStats still reads).
type PubStats struct {
	ConnectionStats
	Role           string `json:"role"` // "pub"
	Topic          string `json:"topic"`
	QoS            int    `json:"qos"`
	Size           int    `json:"size"`
	Sent           int    `json:"sent"`
	Acked          int    `json:"acked"`
	Failed         int    `json:"failed"`
	FirstSendNs    int64  `json:"first_send_ns"`
	LastAcceptedNs int64  `json:"last_accepted_ns"`
	// Reconnects (iotq pub --reconnect) counts the connections made after
	// the first because one was lost; ReconnectEvents has one entry each.
	// Resent counts the unacknowledged messages published again.
	Reconnects      int              `json:"reconnects,omitempty"`
	Resent          int              `json:"resent,omitempty"`
	ReconnectEvents []ReconnectEvent `json:"reconnect_events,omitempty"`
}

// ReconnectEvent is one reconnection of `iotq pub --reconnect`: when the
// loss was noticed, when the new connection was accepted (CONNACK), how
// many dials it took, what was resent and whether TLS or QUIC resumed
// the session from the ticket.
type ReconnectEvent struct {
	LostNs      int64   `json:"lost_ns"`
	ConnectedNs int64   `json:"connected_ns"`
	Ms          float64 `json:"ms"` // ConnectedNs - LostNs
	Attempts    int     `json:"attempts"`
	Resent      int     `json:"resent"`
	TLSResumed  bool    `json:"tls_resumed"`
	Cause       string  `json:"cause"`
}

// ReadPubStats reads the --stats json object of `iotq pub` from path
// (the last line holding one); ok is false when there is none.
func ReadPubStats(path string) (ps PubStats, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ps, false
	}
	lines := bytes.Split(b, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		if json.Unmarshal(l, &ps) == nil {
			return ps, true
		}
	}
	return ps, false
}

// SubStats is the one JSON object of `iotq sub --stats json`.
type SubStats struct {
	ConnectionStats
	Role       string       `json:"role"` // "sub"
	Topics     []string     `json:"topics"`
	QoS        int          `json:"qos"`
	Received   int          `json:"received"`   // all messages
	Measured   int          `json:"measured"`   // messages with a measurement header
	Duplicates int          `json:"duplicates"` // measured messages seen before
	Delay      DelaySummary `json:"delay"`      // over first copies
}

// DelaySummary describes the one-way delays of sub's first copies, in ms.
// Percentiles are type 7 (internal/stats), as in the report. All zero
// when no message was measured.
type DelaySummary struct {
	N      int     `json:"n"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	SdMs   float64 `json:"sd_ms"` // 0 for a single value
}

// SummarizeDelays describes delays given in ms.
func SummarizeDelays(ms []float64) DelaySummary {
	if len(ms) == 0 {
		return DelaySummary{}
	}
	s := stats.Sorted(ms)
	d := DelaySummary{N: len(s), MeanMs: stats.Mean(s), MinMs: s[0], MaxMs: s[len(s)-1],
		P50Ms: stats.PercentileSorted(s, 50), P95Ms: stats.PercentileSorted(s, 95), P99Ms: stats.PercentileSorted(s, 99)}
	if len(s) > 1 {
		d.SdMs = stats.StdDev(s)
	}
	return d
}

// ReadConnectionStats extracts the connection facts from a pub or sub
// process's standard output, which holds the stats JSON object and may
// also hold notification lines ("recv SEQ"). The facts are read from the
// top level, or from the "connection" object of earlier versions' output.
// ok is false when the file holds no stats object.
func ReadConnectionStats(path string) (cs ConnectionStats, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cs, false
	}
	var keep [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("recv ")) {
			keep = append(keep, line)
		}
	}
	b = bytes.Join(keep, []byte("\n"))
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return cs, false
	}
	var v struct {
		ConnectionStats
		Connection *ConnectionStats `json:"connection"`
	}
	if err := json.NewDecoder(bytes.NewReader(b[i:])).Decode(&v); err != nil {
		return cs, false
	}
	if v.Connection != nil {
		return *v.Connection, true
	}
	return v.ConnectionStats, true
}
