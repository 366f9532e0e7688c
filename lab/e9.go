package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/iotq/iotq/records"
)

// E9, head-of-line blocking: pattern multi-topic. One publisher connection
// sends on Cell.Topics periodic topics (iotq pub --topics) and, in the
// variant, a large-message topic beside them; the subscriber takes them
// all with one wildcard subscription. The report reads per topic
// (report/e9.go).

// defaultTopics is Spec.Topics with pattern multi-topic when not given.
const defaultTopics = 10

// LargeMessage is one choice of the large-message topic of pattern
// multi-topic (Spec.LargeMessages): Size bytes every Interval; Size 0 is
// none.
type LargeMessage struct {
	Size     int      `yaml:"size"`
	Interval Duration `yaml:"interval,omitempty"`
}

// largeMessagesOf is the large-message choices a cell of pattern expands
// into: the spec's for multi-topic, one (none) for the other patterns.
func largeMessagesOf(s Spec, pattern string) []LargeMessage {
	if pattern != PatternMultiTopic || len(s.LargeMessages) == 0 {
		return []LargeMessage{{}}
	}
	return s.LargeMessages
}

// onlyMultiTopic reports whether every pattern of the (defaulted) spec is
// multi-topic: then datagram cells are made at QoS 0 only, beside QoS 1
// cells of the stream transports, instead of refusing the sweep.
func onlyMultiTopic(d Spec) bool {
	for _, p := range d.Patterns {
		if p != PatternMultiTopic {
			return false
		}
	}
	return len(d.Patterns) > 0
}

// validateMultiTopic checks the multi-topic fields; d is the spec with
// defaults, s as written.
func validateMultiTopic(d, s Spec, bad func(string, string, ...any)) {
	multi := slices.Contains(d.Patterns, PatternMultiTopic)
	if !multi {
		if s.Topics != 0 {
			bad("topics", "only for pattern multi-topic: add multi-topic to patterns, or leave topics out")
		}
		if len(s.LargeMessages) > 0 {
			bad("large_messages", "only for pattern multi-topic: add multi-topic to patterns, or leave large_messages out")
		}
		return
	}
	if d.Topics < 1 || d.Topics > records.MaxTopics {
		bad("topics", "%d: want 1 to %d periodic topics (default %d)", d.Topics, records.MaxTopics, defaultTopics)
	}
	if d.Topology.Kind != KindPubBrokerSub {
		bad("patterns", "multi-topic runs on topology kind pub-broker-sub only (one publisher device)")
	}
	for i, t := range d.Transports {
		if ProtocolOf(t) != records.ProtocolMQTT {
			bad(fmt.Sprintf("transports[%d]", i), "%s with pattern multi-topic: its subscriber takes every topic with a wildcard (TOPIC/#), which only MQTT has; use mqtts or quic", t)
		}
	}
	if slices.Contains(d.QUICDatagrams, true) && !slices.Contains(d.QoS, 0) {
		bad("quic_datagrams", "true without QoS 0: only QoS 0 messages go as QUIC datagrams, so no cell would use them; add 0 to qos")
	}
	seen := map[LargeMessage]bool{}
	for i, l := range d.LargeMessages {
		p := fmt.Sprintf("large_messages[%d]", i)
		switch {
		case l.Size == 0 && l.Interval != 0:
			bad(p, "interval %s without a size: {size: 0} is the cell without a large-message topic; give a size, for example {size: 65536, interval: 2s}", l.Interval)
		case l.Size != 0 && (l.Size < MinPayloadSize || l.Size > 1<<20):
			bad(p+".size", "%d: want %d bytes (the measurement header) to 1 MiB, or 0 for none", l.Size, MinPayloadSize)
		case l.Size != 0 && l.Interval <= 0:
			bad(p+".interval", "missing: a large-message topic needs its interval, for example {size: %d, interval: 2s}", l.Size)
		}
		if seen[l] {
			bad(p, "listed twice")
		}
		seen[l] = true
	}
}

// multiTopicIDParts name a multi-topic cell's topics and large-message
// topic in its id ("topics10", "large65536B-every2s"); none for the other
// patterns, whose ids stay as they were.
func multiTopicIDParts(c Cell) []string {
	if c.Pattern != PatternMultiTopic {
		return nil
	}
	parts := []string{fmt.Sprintf("topics%d", c.Topics)}
	if c.LargeSize > 0 {
		parts = append(parts, fmt.Sprintf("large%dB-every%s", c.LargeSize, c.LargeInterval()))
	}
	return parts
}

// multiTopicSchedule is the publisher's schedule of a multi-topic cell
// (records.MultiTopicSchedule, the schedule `iotq pub --topics` runs): how
// many messages, and when each is due.
func multiTopicSchedule(c Cell, base string) []records.TopicSlot {
	return records.MultiTopicSchedule(base, c.Topics, c.Messages, c.Interval(), c.LargeInterval())
}

// multiTopicWait is what a multi-topic repetition waits beyond its stream
// (estimate): with datagrams on a lossy link some messages never arrive,
// so the subscriber is stopped only after the grace and four round trips.
func multiTopicWait(c Cell) time.Duration {
	if _, dg := quicStreamsOf(c); dg && c.Transport == TransportQUIC && c.PubLink.LossPct > 0 {
		return time.Duration(c.GraceNs) + 4*c.PathRTT()
	}
	return 0
}

// multiTopicArgs are iotq pub's flags of the cell's topics.
func multiTopicArgs(c Cell) PubTopicsArgs {
	a := PubTopicsArgs{Topics: c.Topics}
	if c.LargeSize > 0 {
		a.LargeSize, a.LargeInterval = c.LargeSize, c.LargeInterval()
	}
	return a
}

// repMultiTopic runs one repetition of pattern multi-topic: the subscriber
// takes base/m/# and waits for every message of the schedule; the
// publisher sends it over one connection.
func (cr *cellRun) repMultiTopic(ctx context.Context, rep int, repDir, base string) error {
	topic := base + "/m"
	total := len(multiTopicSchedule(cr.c, topic))
	sendTime := time.Duration(cr.c.Messages) * cr.c.Interval()
	// a lossy link may fall behind the offered load (the large topic's
	// bytes): the publisher drains its backlog after the last slot
	deadline := 2*sendTime + cr.handshakeAllowance() + cr.grace()
	sub, err := cr.startSub(ctx, rep, repDir, topic+"/#", total, deadline+10*time.Second, spawnOpts{})
	if err != nil {
		return err
	}
	args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), topic, filepath.Join(repDir, "pub.csv"), cr.c.Messages, cr.c.Interval())
	args.MultiTopic = multiTopicArgs(cr.c)
	pub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "pub", args.Argv(), spawnOpts{})
	if err != nil {
		sub.stop(3 * time.Second)
		return err
	}
	var runErr error
	if !pub.wait(ctx, deadline) {
		runErr = fmt.Errorf("publisher did not finish within %s", deadline)
	}
	return cr.finishOnePub(ctx, rep, repDir, topic, pub, sub, nil, runErr)
}

// multiTopicLateness is how late each message of a multi-topic publisher
// left: its send_ns minus its due time, message 0's send_ns (topic 0's
// first, due at the schedule's start) plus its slot's offset, or minus its
// ready_ns (readyLateness): a topic whose large message blocked the client
// is late because of the transport, which is what E9 measures.
func multiTopicLateness(pubs []records.PubRecord, c Cell) []time.Duration {
	slots := multiTopicSchedule(c, "t")
	var anchor int64
	for _, p := range pubs {
		if p.Seq == 0 && p.SendNs > 0 {
			anchor = p.SendNs
			break
		}
	}
	if anchor == 0 {
		return nil
	}
	out := make([]time.Duration, 0, len(pubs))
	for _, p := range pubs {
		if p.SendNs <= 0 || p.Seq < 0 || p.Seq >= int64(len(slots)) {
			continue
		}
		out = append(out, readyLateness(p, anchor+int64(slots[p.Seq].At)))
	}
	return out
}
