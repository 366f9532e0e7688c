package records

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// Pattern multi-topic (E9): the schedule of one publisher connection that
// sends on several periodic topics and, optionally, a large-message topic.
// `iotq pub --topics` (client/measure.MultiPublisher) publishes it, the lab
// counts the messages to wait for and derives each one's send lateness
// from it, so it has this one home.

// MaxTopics bounds the periodic topics of a multi-topic run (the publisher
// runs one goroutine per topic).
const MaxTopics = 1000

// TopicSlot is one message of a multi-topic schedule.
type TopicSlot struct {
	// Seq counts across every topic, in the order the messages are due.
	Seq   uint32
	Topic string
	// At is when the message is due, from the run's start (topic 0's first
	// message, seq 0, is due at 0).
	At time.Duration
	// Large marks the large-message topic's messages.
	Large bool
	order int // topic index (topics for the large one): equal times go in topic order
}

// TopicName is periodic topic k under base (base/k).
func TopicName(base string, k int) string { return base + "/" + strconv.Itoa(k) }

// LargeTopicName is the large-message topic under base (base/large).
func LargeTopicName(base string) string { return base + "/" + TopicLarge }

// MultiTopicSchedule returns every message of a multi-topic run in the
// order they are due: topics periodic topics base/0 ... base/N-1, count
// messages each every interval, topic k starting k*interval/topics after
// topic 0 (the phases spread evenly over the interval); with
// largeInterval > 0 the large-message topic base/large, one message every
// largeInterval while the periodic topics run (due before count*interval),
// starting half a topic slot after topic 0 (interval/(2*topics)) so that it
// never coincides with a periodic message. topics, count and interval must
// be positive.
func MultiTopicSchedule(base string, topics, count int, interval, largeInterval time.Duration) []TopicSlot {
	if topics < 1 || count < 1 || interval <= 0 {
		return nil
	}
	out := make([]TopicSlot, 0, topics*count)
	for k := range topics {
		phase := time.Duration(k) * interval / time.Duration(topics)
		name := TopicName(base, k)
		for j := range count {
			out = append(out, TopicSlot{Topic: name, At: phase + time.Duration(j)*interval, order: k})
		}
	}
	if largeInterval > 0 {
		end := time.Duration(count) * interval
		name := LargeTopicName(base)
		for at := interval / time.Duration(2*topics); at < end; at += largeInterval {
			out = append(out, TopicSlot{Topic: name, At: at, Large: true, order: topics})
		}
	}
	slices.SortStableFunc(out, func(a, b TopicSlot) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return a.order - b.order
	})
	for i := range out {
		out[i].Seq = uint32(i)
	}
	return out
}
