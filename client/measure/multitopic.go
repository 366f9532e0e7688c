package measure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/payload"
	"github.com/iotq/iotq/records"
)

// MultiTopicOptions describe one multi-topic run (E9, head-of-line
// blocking): one connection publishes on Topics periodic topics
// (Topic/0 ... Topic/N-1), each Count measurement messages of Size bytes
// every Interval, their phases spread evenly over the interval (topic k
// starts at k*Interval/Topics), and, with LargeSize > 0, a large-message
// topic Topic/large: one message of LargeSize bytes every LargeInterval
// while the periodic topics run (records.MultiTopicSchedule has the exact
// schedule). Sequence numbers count across every topic in the order the
// messages are due, so a message is known by its seq alone.
type MultiTopicOptions struct {
	Topic         string // base topic, no wildcards (required)
	Topics        int    // periodic topics, 1 to records.MaxTopics
	QoS           byte   // 0, 1 or 2
	Size          int    // measurement payload of the periodic topics (at least payload.HeaderSize)
	Count         int    // messages per periodic topic, at least 1
	Interval      time.Duration
	LargeSize     int // 0: no large-message topic
	LargeInterval time.Duration
	// AckWait bounds the wait for outstanding receipts after the last
	// publish; 0 means do not wait (pending receipts count as failed).
	AckWait time.Duration
	// RunID is the payload run id; 0 draws a random one.
	RunID uint64
	// OnResult, if set, receives every message's outcome: per topic in
	// publish order, one call at a time (topics interleave).
	OnResult func(Result)
}

// Validate reports every problem of o at once, each naming the flag-like
// field and what to give instead.
func (o MultiTopicOptions) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case o.Topic == "":
		add("topic is required (the base: messages go to TOPIC/0 ... TOPIC/N-1)")
	case strings.ContainsAny(o.Topic, "+#"):
		add("topic %q: a topic to publish to must not contain + or #", o.Topic)
	}
	if o.Topics < 1 || o.Topics > records.MaxTopics {
		add("topics %d: want 1 to %d", o.Topics, records.MaxTopics)
	}
	if o.QoS > 2 {
		add("QoS %d: want 0, 1 or 2", o.QoS)
	}
	if o.Size <= 0 {
		add("size %d: several topics need measurement payloads (give a size of at least %d bytes)", o.Size, payload.HeaderSize)
	} else if err := payload.CheckSize(o.Size); err != nil {
		errs = append(errs, err)
	}
	if o.Count < 1 {
		add("count %d: want at least 1 message per topic", o.Count)
	}
	if o.Interval <= 0 {
		add("interval %s: several topics need a positive interval (each topic publishes every interval)", o.Interval)
	}
	switch {
	case o.LargeSize < 0:
		add("large size %d: must not be negative (0: no large-message topic)", o.LargeSize)
	case o.LargeSize > 0:
		if err := payload.CheckSize(o.LargeSize); err != nil {
			errs = append(errs, fmt.Errorf("large size: %w", err))
		}
		if o.LargeInterval <= 0 {
			add("a large-message topic needs its interval (large interval %s: give a positive one)", o.LargeInterval)
		}
	case o.LargeInterval != 0:
		add("large interval %s without a large size: give both or neither", o.LargeInterval)
	}
	if o.AckWait < 0 {
		add("ack wait must not be negative")
	}
	return errors.Join(errs...)
}

// Schedule returns every message of the run in the order they are due,
// with their sequence numbers (records.MultiTopicSchedule, the schedule's
// one home). o must be valid.
func (o MultiTopicOptions) Schedule() []records.TopicSlot {
	li := time.Duration(0)
	if o.LargeSize > 0 {
		li = o.LargeInterval
	}
	return records.MultiTopicSchedule(o.Topic, o.Topics, o.Count, o.Interval, li)
}

// MultiPublisher publishes one multi-topic run. Use it once: Run.
type MultiPublisher struct {
	o     MultiTopicOptions
	slots []records.TopicSlot

	mu  sync.Mutex // guards sum
	sum Summary
	// reportMu serialises OnResult, apart from mu so that a slow callback
	// never holds up a publishing goroutine
	reportMu sync.Mutex
}

// NewMultiPublisher validates o and returns a MultiPublisher.
func NewMultiPublisher(o MultiTopicOptions) (*MultiPublisher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.RunID == 0 {
		o.RunID = payload.NewRunID()
	}
	return &MultiPublisher{o: o, slots: o.Schedule()}, nil
}

// Messages is the number of messages the run publishes (every topic's).
func (p *MultiPublisher) Messages() int { return len(p.slots) }

// Run publishes the schedule on c, then waits up to AckWait for
// outstanding receipts, and returns the summary. Each topic has a
// goroutine of its own that publishes its messages when they are due, so a
// message that blocks in the client (a large one, or one behind a full
// stream) holds back only its own topic's next messages at the hand-over;
// whatever the transport then holds back is in the receiver's delays. Run
// stops early when ctx ends or the connection is lost; it does not close
// c, and every goroutine it started has ended when it returns.
func (p *MultiPublisher) Run(ctx context.Context, c client.Client) Summary {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	byTopic := map[string][]records.TopicSlot{}
	var topics []string
	for _, s := range p.slots {
		if _, ok := byTopic[s.Topic]; !ok {
			topics = append(topics, s.Topic)
		}
		byTopic[s.Topic] = append(byTopic[s.Topic], s)
	}
	// The schedule starts a little ahead, so that every goroutine waits
	// for its first slot instead of racing to it.
	start := time.Now().Add(10 * time.Millisecond)
	stopWait := make(chan struct{})
	var pubs, collectors sync.WaitGroup
	for _, topic := range topics {
		slots := byTopic[topic]
		// room for every message: a publishing goroutine never waits for
		// its collector
		queue := make(chan pending, len(slots))
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			defer close(queue)
			p.publishTopic(ctx, c, cancel, start, slots, queue)
		}()
		collectors.Add(1)
		go func() {
			defer collectors.Done()
			for pe := range queue {
				p.collect(pe, topic, stopWait)
			}
		}()
	}
	pubs.Wait()
	if p.o.AckWait > 0 {
		done := make(chan struct{})
		go func() { collectors.Wait(); close(done) }()
		t := time.NewTimer(p.o.AckWait)
		select {
		case <-done:
			t.Stop()
			close(stopWait)
		case <-t.C:
			close(stopWait)
			<-done
		}
	} else {
		close(stopWait)
		collectors.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sum
}

// publishTopic publishes one topic's slots when they are due and queues
// each for its receipt. A lost connection ends the whole run (cancel).
func (p *MultiPublisher) publishTopic(ctx context.Context, c client.Client, cancel func(), start time.Time, slots []records.TopicSlot, queue chan<- pending) {
	var freeNs int64 // when the previous hand-over returned
	for _, s := range slots {
		due := start.Add(s.At)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.Done():
				t.Stop()
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		size := p.o.Size
		if s.Large {
			size = p.o.LargeSize
		}
		body := make([]byte, size)
		sendNs := time.Now().UnixNano()
		payload.Put(body, payload.Header{Seq: s.Seq, SendNs: sendNs, RunID: p.o.RunID})
		pe := pending{seq: s.Seq, size: size, sendNs: sendNs, dueNs: due.UnixNano()}
		pe.readyNs = max(pe.dueNs, freeNs)
		pe.r, pe.err = c.Publish(ctx, s.Topic, body, client.PublishOptions{QoS: p.o.QoS})
		freeNs = time.Now().UnixNano()
		p.mu.Lock()
		p.sum.Sent++
		if p.sum.FirstSendNs == 0 || sendNs < p.sum.FirstSendNs {
			p.sum.FirstSendNs = sendNs
		}
		p.mu.Unlock()
		queue <- pe
		if errors.Is(pe.err, client.ErrConnectionLost) {
			cancel()
			return
		}
	}
}

// collect waits for one receipt (until stop), counts and reports it.
func (p *MultiPublisher) collect(pe pending, topic string, stop <-chan struct{}) {
	res := pe.outcome(topic, stop)
	p.mu.Lock()
	p.sum.count(res)
	p.mu.Unlock()
	if p.o.OnResult != nil {
		p.reportMu.Lock()
		defer p.reportMu.Unlock()
		p.o.OnResult(res)
	}
}
