package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
)

// BatchResult holds the figures of one cell of the batch patterns (E8: a
// batch of messages on a fresh connection per repetition, or resuming the
// previous one's session). Times in ms, the communication time in s.
type BatchResult struct {
	Cell       string  `json:"cell"`
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	Protocol   string  `json:"protocol"`
	Transport  string  `json:"transport"`
	Pattern    string  `json:"pattern"`
	QoS        int     `json:"qos"`
	Size       int     `json:"size"`
	Messages   int     `json:"messages"`
	// Incomplete counts repetitions left out of CommS because not every
	// message arrived.
	Incomplete int `json:"incomplete_reps"`
	// CommS: connection start at the sender to the receiver's last message
	// of the batch (completions.csv), one value per complete repetition.
	CommS stats.Summary `json:"communication_s"`
	// CommDegradation is CommS.Mean divided by the same transport's mean at
	// 0 % loss (same experiment, profile, pattern, QoS and size); NaN
	// without a 0 % cell.
	CommDegradation float64 `json:"communication_degradation"`
	// AckRTTMs: per message, send to the broker's acknowledgement
	// (accepted_ns - send_ns in messages.csv): sender to broker and back.
	AckRTTMs          stats.Summary `json:"ack_rtt_ms"`
	AckRTTDegradation float64       `json:"ack_rtt_degradation"`
	// EchoRTTMs (pattern batch-echo): per message, send to the receiver's
	// echo arriving back at the sender (echo_ns - send_ns).
	EchoRTTMs          stats.Summary `json:"echo_rtt_ms"`
	EchoRTTDegradation float64       `json:"echo_rtt_degradation"`
	// StartupMs: the sender's dial start to the receiver's first message of
	// the repetition (connections.csv), with its physical bound.
	StartupMs      stats.Summary `json:"startup_ms"`
	StartupBoundMs float64       `json:"startup_bound_ms"`
	// Reps with TLS resumption / QUIC 0-RTT on the sender's connection.
	Resumed int `json:"resumed"`
	ZeroRTT int `json:"used_0rtt"`
	// DeliveryRatio over every message of the cell.
	DeliveryRatio float64 `json:"delivery_ratio"`
}

func isBatch(pattern string) bool {
	return pattern == records.PatternBatch || pattern == records.PatternBatchResume || pattern == records.PatternBatchEcho
}

// batchResults computes the batch figures of the cells of the batch
// patterns, from completions.csv, messages.csv and connections.csv.
func batchResults(ds *dataset, cells []*CellResult) []*BatchResult {
	byID := map[string]*BatchResult{}
	var out []*BatchResult
	for _, c := range cells {
		if !isBatch(c.Pattern) {
			continue
		}
		b := &BatchResult{Cell: c.Cell, Experiment: c.Experiment, Profile: c.Profile, LossPct: c.LossPct,
			Protocol: records.ProtocolOr(c.protocol), Transport: c.Transport, Pattern: c.Pattern, QoS: c.QoS, Size: c.Size,
			DeliveryRatio: c.DeliveryRatio, CommDegradation: nan(), AckRTTDegradation: nan(), EchoRTTDegradation: nan(),
			StartupBoundMs: nan()}
		byID[c.Cell] = b
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil
	}
	comm := map[string][]float64{}
	for _, r := range ds.compl {
		b := byID[r.Cell]
		if b == nil {
			continue
		}
		b.Messages = max(b.Messages, r.Published)
		if r.Delivered < r.Published || r.CompletionNs <= 0 {
			b.Incomplete++
			continue
		}
		comm[r.Cell] = append(comm[r.Cell], float64(r.CompletionNs)/1e9)
	}
	ack, echo := map[string][]float64{}, map[string][]float64{}
	for _, m := range ds.messages {
		if b := byID[m.Cell]; b != nil {
			if d := m.AckRTT(); d > 0 {
				ack[m.Cell] = append(ack[m.Cell], float64(d)/1e6)
			}
			if d := m.EchoRTT(); d > 0 {
				echo[m.Cell] = append(echo[m.Cell], float64(d)/1e6)
			}
		}
	}
	startup := map[string][]float64{}
	type repKey struct {
		cell string
		rep  int
	}
	seen := map[repKey]bool{}
	for _, r := range ds.conns {
		b := byID[r.Cell]
		if b == nil || r.Role != records.RolePub || seen[repKey{r.Cell, r.Rep}] {
			continue
		}
		seen[repKey{r.Cell, r.Rep}] = true
		if r.Resumed {
			b.Resumed++
		}
		if r.Used0RTT {
			b.ZeroRTT++
		}
		if r.DialStartNs > 0 && r.FirstDeliveryNs > r.DialStartNs {
			startup[r.Cell] = append(startup[r.Cell], float64(r.FirstDeliveryNs-r.DialStartNs)/1e6)
		}
	}
	cellOf := map[string]*CellResult{}
	for _, c := range cells {
		cellOf[c.Cell] = c
	}
	for _, b := range out {
		b.CommS = stats.Summarize(comm[b.Cell])
		b.AckRTTMs = stats.Summarize(ack[b.Cell])
		b.EchoRTTMs = stats.Summarize(echo[b.Cell])
		b.StartupMs = stats.Summarize(startup[b.Cell])
		if c := cellOf[b.Cell]; c.Link.Source != "" {
			b.StartupBoundMs = startupBound(c.Link, b.Transport, b.ZeroRTT > 0)
		}
	}
	// degradation: each transport against its own figure at 0 % loss
	key := func(b *BatchResult) string {
		return fmt.Sprintf("%s|%s|%s|%s|%d|%d", b.Experiment, b.Profile, b.Transport, b.Pattern, b.QoS, b.Size)
	}
	base := map[string]*BatchResult{}
	for _, b := range out {
		if b.LossPct == 0 {
			base[key(b)] = b
		}
	}
	ratio := func(v, ref float64) float64 {
		if ref > 0 && !math.IsNaN(ref) && !math.IsNaN(v) {
			return v / ref
		}
		return nan()
	}
	for _, b := range out {
		if z := base[key(b)]; z != nil {
			b.CommDegradation = ratio(b.CommS.Mean, z.CommS.Mean)
			b.AckRTTDegradation = ratio(b.AckRTTMs.Mean, z.AckRTTMs.Mean)
			b.EchoRTTDegradation = ratio(b.EchoRTTMs.Mean, z.EchoRTTMs.Mean)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Experiment != b.Experiment:
			return a.Experiment < b.Experiment
		case a.Pattern != b.Pattern:
			return a.Pattern < b.Pattern
		case rank(a.Profile) != rank(b.Profile):
			return rank(a.Profile) < rank(b.Profile)
		case a.LossPct != b.LossPct:
			return a.LossPct < b.LossPct
		case isQUIC(a.Transport) != isQUIC(b.Transport):
			return !isQUIC(a.Transport)
		}
		return a.Cell < b.Cell
	})
	return out
}

// batchTable is the E8 table: one row per batch cell.
func batchTable(s *Summary) tab {
	t := tab{id: "batch", title: "Batch over a fresh or resumed connection (E8)",
		intro: "One row per cell of pattern batch (a new connection per repetition) or batch-resume (resuming the previous " +
			"repetition's TLS session / QUIC 0-RTT ticket) or batch-echo (fresh, the receiver echoing each message back). comm = sender's connection start to the receiver's last message of the batch, in s " +
			"(complete repetitions); ack RTT = send to the broker's acknowledgement per message, in ms; echo RTT = send to the " +
			"receiver's echo arriving back at the sender (batch-echo), in ms; startup = connection start to the " +
			"receiver's first message, in ms, with its bound (transport handshake round trips + one-way path); x0% = mean divided by the same " +
			"transport's mean at 0 % loss.",
		head: []string{"experiment", "pattern", "profile", "loss %", "protocol", "transport", "reps", "incomplete", "comm mean", "comm median",
			"comm p95", "comm x0%", "ack RTT mean", "ack RTT p95", "ack RTT x0%", "echo RTT mean", "echo RTT p95", "echo x0%", "startup median", "startup bound", "resumed", "0-RTT", "delivery"}}
	for _, b := range s.Batch {
		t.rows = append(t.rows, []string{b.Experiment, b.Pattern, b.Profile, loss(b.LossPct), b.Protocol, b.Transport,
			strconv.Itoa(b.CommS.N), strconv.Itoa(b.Incomplete), fmtF(b.CommS.Mean, 3), fmtF(b.CommS.Median, 3), fmtF(b.CommS.P95, 3),
			fmtF(b.CommDegradation, 2), fmtF(b.AckRTTMs.Mean, 1), fmtF(b.AckRTTMs.P95, 1), fmtF(b.AckRTTDegradation, 2),
			fmtF(b.EchoRTTMs.Mean, 1), fmtF(b.EchoRTTMs.P95, 1), fmtF(b.EchoRTTDegradation, 2),
			fmtF(b.StartupMs.Median, 1), fmtF(b.StartupBoundMs, 1), strconv.Itoa(b.Resumed), strconv.Itoa(b.ZeroRTT), fmtF(b.DeliveryRatio, 4)})
	}
	return t
}

// protocolTable is the E7 table: the publisher's protocol and transport on
// a lossy link, closed loop (pattern closed-loop), one row per cell.
func protocolTable(s *Summary) tab {
	t := tab{id: "protocols", title: "Protocols on the lossy link, closed loop (E7)",
		intro: "One row per cell of pattern closed-loop (the next message once the previous one is acknowledged; a CoAP " +
			"message that ran out of retransmissions counts as lost). Delays in ms over the messages received. " +
			"bytes/msg = every byte on the publisher's link in both directions (handshakes and retransmissions included) per " +
			"delivered message; overhead = bytes/msg divided by the payload size.",
		head: []string{"experiment", "profile", "loss %", "size", "protocol", "transport", "published", "delivery",
			"mean", "median", "p95", "bytes/msg", "overhead"}}
	for _, c := range s.Cells {
		if c.Pattern != records.PatternClosedLoop {
			continue
		}
		over := nan()
		if c.Size > 0 {
			over = c.BytesPerMessage / float64(c.Size)
		}
		t.rows = append(t.rows, []string{c.Experiment, c.Profile, loss(c.LossPct), strconv.Itoa(c.Size), records.ProtocolOr(c.protocol),
			c.Transport, strconv.Itoa(c.Published), fmtF(c.DeliveryRatio, 4), fmtF(c.DelayMs.Mean, 1), fmtF(c.DelayMs.Median, 1),
			fmtF(c.DelayMs.P95, 1), fmtF(c.BytesPerMessage, 1), fmtF(over, 2)})
	}
	return t
}
