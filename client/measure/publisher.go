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
)

// PublisherOptions describe one publishing run.
type PublisherOptions struct {
	Topic  string // topic name, no wildcards (required)
	QoS    byte   // 0, 1 or 2
	Retain bool
	// Message is the body of every message when Size is 0.
	Message []byte
	// Size > 0 publishes measurement payloads of Size bytes (at least
	// payload.HeaderSize).
	Size int
	// Count is the number of messages (with Gate: at most). At least 1.
	Count int
	// Interval is the time between message starts (0: back to back):
	// message i is due at message 0's send time plus i*Interval (see
	// Result.DueNs). Ignored with Gate.
	Interval time.Duration
	// ClosedLoop publishes message i+1 only once message i's receipt
	// completed (acknowledged or failed): one message in flight, as a
	// confirmable CoAP client with NSTART 1 sends. With Interval, the next
	// message also waits for its slot.
	ClosedLoop bool
	// Gate, if set, releases one message per value received; when it is
	// closed the run ends.
	Gate <-chan struct{}
	// Early sends message 0 in the same write as the protocol's connect
	// (QoS 0 or 1; over QUIC with a ticket in the 0-RTT flight): call
	// EarlyMessage before dialling and pass its result in
	// client.Options.Early. At QoS 1 its receipt completes on the broker's
	// PUBACK.
	Early bool
	// AckWait bounds the wait for outstanding receipts after the last
	// publish; 0 means do not wait (pending receipts count as failed).
	AckWait time.Duration
	// Properties are sent with every message (client.PublishOptions;
	// AMQP only). Not with Early.
	Properties map[string]string
	// MessageID is the message id of the message (AMQP only); with Count
	// above 1 message SEQ gets MessageID-SEQ (0, 1, 2, ...). Not with
	// Early.
	MessageID string
	// RunID is the payload run id; 0 draws a random one.
	RunID uint64
	// OnResult, if set, receives every message's outcome in publish order.
	OnResult func(Result)
	// Reconnect, if set, dials again when the connection is lost and
	// publishes what was not acknowledged once more (reconnect.go). Not
	// with Gate, ClosedLoop, Early, Properties or MessageID.
	Reconnect *Reconnect
}

// Validate reports every problem of o at once.
func (o PublisherOptions) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case o.Topic == "":
		add("topic is required")
	case strings.ContainsAny(o.Topic, "+#"):
		add("topic %q: a topic to publish to must not contain + or #", o.Topic)
	}
	if o.QoS > 2 {
		add("QoS %d: want 0, 1 or 2", o.QoS)
	}
	if o.Size < 0 {
		add("size %d: must be positive", o.Size)
	} else if o.Size > 0 {
		if err := payload.CheckSize(o.Size); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Count < 1 {
		add("count %d: want at least 1", o.Count)
	}
	if o.Early && (len(o.Properties) > 0 || o.MessageID != "") {
		add("early: the message sent with the connect carries no properties or message id")
	}
	if o.Early && o.QoS > 1 {
		add("early needs QoS 0 or 1: a QoS 2 exchange (PUBREC, PUBREL) cannot start before the connection is accepted")
	}
	if r := o.Reconnect; r != nil {
		switch {
		case r.Redial == nil:
			add("reconnect: no function to dial again with")
		case o.Gate != nil || o.ClosedLoop || o.Early:
			add("reconnect: only for a paced or back-to-back run (not with a gate, closed loop or early)")
		case len(o.Properties) > 0 || o.MessageID != "":
			add("reconnect: MQTT only; messages with properties or a message id are AMQP's")
		case r.Within < 0:
			add("reconnect: the time to reconnect must not be negative")
		}
	}
	if o.Interval < 0 || o.AckWait < 0 {
		add("interval and ack wait must not be negative")
	}
	return errors.Join(errs...)
}

// Result is the outcome of one message.
type Result struct {
	Seq uint32
	// Topic is the topic the message went to (a MultiPublisher's differ).
	Topic  string
	Size   int
	SendNs int64 // taken just before the hand-over; the payload's send time
	// DueNs is when a paced message (Interval, no Gate) was due: message
	// 0's SendNs plus Seq*Interval, in SendNs's clock (MultiPublisher: the
	// run's start plus the message's records.TopicSlot.At). SendNs-DueNs is how
	// late it left: the scheduling delay of the publishing goroutine after
	// its timer, or a hand-over that blocked past the slot. 0 when not
	// paced.
	DueNs int64
	// ReadyNs is when a paced message could leave at the earliest: its
	// DueNs, or the return of the previous hand-over on the same
	// publishing goroutine if that came later. SendNs-ReadyNs is the
	// goroutine's scheduling delay alone (the host), while SendNs-DueNs
	// also holds a hand-over that blocked (the transport). 0 when not
	// paced.
	ReadyNs    int64
	AcceptedNs int64 // receipt time; 0 when not accepted
	Err        error // nil when accepted
}

// Summary is the outcome of a run.
type Summary struct {
	Sent, Acked, Failed int
	FirstErr            error // first failure, nil if none
	FirstSendNs         int64 // send time of the first message; 0 if none
	LastAcceptedNs      int64 // receipt time of the last accepted message
	// Reconnects lists the reconnections (PublisherOptions.Reconnect),
	// the last one failed when it has Err; Resent counts the messages
	// published again after them.
	Reconnects []ReconnectEvent
	Resent     int
}

// Publisher publishes one run of messages. Use it once: EarlyMessage (with
// Early), then Run.
type Publisher struct {
	o     PublisherOptions
	early *pending // message 0 with Early, set by EarlyMessage

	mu  sync.Mutex // guards sum
	sum Summary
}

type pending struct {
	seq     uint32
	size    int
	sendNs  int64
	dueNs   int64
	readyNs int64
	r       *client.Receipt
	err     error // Publish itself failed
}

// NewPublisher validates o and returns a Publisher.
func NewPublisher(o PublisherOptions) (*Publisher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.RunID == 0 {
		o.RunID = payload.NewRunID()
	}
	return &Publisher{o: o}, nil
}

// EarlyMessage prepares message 0 for Options.Early: with a Gate it first
// waits for the gate's first value, then stamps the send time. It returns
// nil, true when Early is off, and ok false when the gate closed or ctx
// ended first (nothing to publish: do not dial).
func (p *Publisher) EarlyMessage(ctx context.Context) (m *client.EarlyMessage, ok bool) {
	if !p.o.Early {
		return nil, true
	}
	if p.o.Gate != nil {
		select {
		case _, open := <-p.o.Gate:
			if !open {
				return nil, false
			}
		case <-ctx.Done():
			return nil, false
		}
	}
	body, sendNs := p.stamp(0)
	m = &client.EarlyMessage{Topic: p.o.Topic, Payload: body, Retain: p.o.Retain, QoS: p.o.QoS}
	p.early = &pending{seq: 0, size: len(body), sendNs: sendNs, r: m.Receipt()}
	return m, true
}

// stamp returns the body of message seq and its send time, taken last.
func (p *Publisher) stamp(seq uint32) ([]byte, int64) {
	if p.o.Size == 0 {
		return append([]byte(nil), p.o.Message...), time.Now().UnixNano()
	}
	body := make([]byte, p.o.Size)
	now := time.Now().UnixNano()
	payload.Put(body, payload.Header{Seq: seq, SendNs: now, RunID: p.o.RunID})
	return body, now
}

// Run publishes on c (dialled with EarlyMessage's message when Early), then
// waits up to AckWait for outstanding receipts, and returns the summary. It
// stops early when ctx ends, the gate closes or the connection is lost
// (with Reconnect: when no new connection came within its bound). It
// does not close c (with Reconnect it closes the connections it replaced
// c with, and c once replaced).
func (p *Publisher) Run(ctx context.Context, c client.Client) Summary {
	if p.o.Reconnect != nil {
		return p.runReconnecting(ctx, c)
	}
	queue := make(chan pending, 1024)
	stopWait := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for pe := range queue {
			p.collect(pe, stopWait)
		}
	}()

	// The schedule is anchored at message 0's send time, read from the
	// wall clock like every SendNs: message i is due at that plus
	// i*Interval, so its lateness (SendNs-DueNs) follows from the records
	// alone, and a publisher whose goroutine woke late shows it.
	var start time.Time
	paced := p.o.Interval > 0 && p.o.Gate == nil
	first := 0
	if p.early != nil {
		pe := *p.early // its receipt is the early message's (client.EarlyMessage.Receipt)
		if paced {
			pe.dueNs, pe.readyNs = pe.sendNs, pe.sendNs
		}
		p.sent(pe.sendNs)
		queue <- pe
		first = 1
		start = time.Unix(0, pe.sendNs)
	}
	var freeNs int64 // when the previous hand-over returned
	if p.early != nil {
		freeNs = time.Now().UnixNano() // message 0 went with the dial, which just ended
	}
	for i := first; i < p.o.Count; i++ {
		if !p.pace(ctx, c, i, start) {
			break
		}
		pe := p.publish(ctx, c, uint32(i))
		returned := time.Now().UnixNano()
		if i == 0 {
			start = time.Unix(0, pe.sendNs)
		}
		if paced {
			pe.dueNs = start.Add(time.Duration(i) * p.o.Interval).UnixNano()
			pe.readyNs = max(pe.dueNs, freeNs)
		}
		freeNs = returned
		queue <- pe
		if errors.Is(pe.err, client.ErrConnectionLost) {
			break
		}
		if p.o.ClosedLoop && pe.err == nil {
			select {
			case <-pe.r.Done():
			case <-ctx.Done():
			case <-c.Done():
			}
			freeNs = time.Now().UnixNano() // the wait for the receipt is the round trip's
		}
	}
	close(queue)
	if p.o.AckWait > 0 {
		t := time.AfterFunc(p.o.AckWait, func() { close(stopWait) })
		<-collected
		if t.Stop() {
			close(stopWait)
		}
	} else {
		close(stopWait)
		<-collected
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sum
}

// pace waits until message i may leave: the next gate value, or its slot
// start+i*Interval. It returns false when the run must end.
func (p *Publisher) pace(ctx context.Context, c client.Client, i int, start time.Time) bool {
	if p.o.Gate != nil {
		select {
		case _, open := <-p.o.Gate:
			return open && ctx.Err() == nil
		case <-ctx.Done():
			return false
		case <-c.Done():
			return false
		}
	}
	if p.o.Interval > 0 && i > 0 {
		if d := time.Until(start.Add(time.Duration(i) * p.o.Interval)); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return false
			case <-c.Done():
				return false
			}
		}
	}
	return ctx.Err() == nil
}

// publish stamps and hands over message seq.
func (p *Publisher) publish(ctx context.Context, c client.Client, seq uint32) pending {
	body, sendNs := p.stamp(seq)
	pe := pending{seq: seq, size: len(body), sendNs: sendNs}
	po := client.PublishOptions{QoS: p.o.QoS, Retain: p.o.Retain, Properties: p.o.Properties, MessageID: p.o.MessageID}
	if po.MessageID != "" && p.o.Count > 1 {
		po.MessageID = fmt.Sprintf("%s-%d", po.MessageID, seq)
	}
	pe.r, pe.err = c.Publish(ctx, p.o.Topic, body, po)
	p.sent(sendNs)
	return pe
}

func (p *Publisher) sent(sendNs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sum.Sent++
	if p.sum.FirstSendNs == 0 {
		p.sum.FirstSendNs = sendNs
	}
}

// collect waits for one receipt (until stop), counts and reports it.
func (p *Publisher) collect(pe pending, stop <-chan struct{}) {
	res := pe.outcome(p.o.Topic, stop)
	p.mu.Lock()
	p.sum.count(res)
	p.mu.Unlock()
	if p.o.OnResult != nil {
		p.o.OnResult(res)
	}
}

// outcome waits for pe's receipt (until stop) and returns the message's
// result: acknowledged (with the time it was accepted) or why not.
func (pe pending) outcome(topic string, stop <-chan struct{}) Result {
	res := Result{Seq: pe.seq, Topic: topic, Size: pe.size, SendNs: pe.sendNs, DueNs: pe.dueNs, ReadyNs: pe.readyNs, Err: pe.err}
	if res.Err == nil {
		select {
		case <-pe.r.Done():
			res.Err = pe.r.Err()
		case <-stop:
			res.Err = errors.New("no acknowledgement in time")
		}
		if at, ok := pe.r.Accepted(); ok {
			res.AcceptedNs = at.UnixNano()
		}
	}
	return res
}

// count adds one message's result to s. Receipts may be collected out of
// order (one collector per topic), so the last acceptance is the latest.
func (s *Summary) count(res Result) {
	if res.Err == nil {
		s.Acked++
		s.LastAcceptedNs = max(s.LastAcceptedNs, res.AcceptedNs)
		return
	}
	s.Failed++
	if s.FirstErr == nil {
		s.FirstErr = res.Err
	}
}
