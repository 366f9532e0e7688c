package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/iotq/iotq/client"
)

// Reconnect makes a publishing run survive a lost connection
// (PublisherOptions.Reconnect; `iotq pub --reconnect`): when the
// connection ends, Run dials again with Redial (bounded by Within, with
// backoff), publishes again every message not yet acknowledged (same
// sequence number and send time, in order) and continues the sequence on
// the new connection. Messages whose slot passed during the outage leave
// at once, in order. The client library gives a resent message a new
// packet identifier and no DUP flag (paho's API sets neither); at QoS 1 a
// broker handles it as any PUBLISH (MQTT 3.1.1 section 4.3.2: a receiver
// treats a PUBLISH after its PUBACK as a new publication whatever DUP
// says), so a message that had reached the broker before the loss is
// delivered twice: the subscriber counts it as a duplicate.
type Reconnect struct {
	// Redial opens a new connection; ctx bounds the attempt. Required.
	Redial func(ctx context.Context) (client.Client, error)
	// Within bounds the time from noticing a loss to a new connection,
	// all attempts included; one attempt gets at most a third of it (at
	// least 5s). 0 means 30s.
	Within time.Duration
	// OnEvent, if set, is called after each reconnection attempt that
	// ended (connected, or gave up: Err set), from Run's goroutine.
	OnEvent func(ReconnectEvent)
}

// ReconnectEvent is one reconnection of a run.
type ReconnectEvent struct {
	Lost      time.Time // when the loss was noticed
	Connected time.Time // when the new connection was accepted; zero if it failed
	Attempts  int       // dials made
	Resent    int       // unacknowledged messages published again
	Cause     error     // why the old connection ended
	Err       error     // why no new connection was made; nil on success
	Info      client.ConnectionInfo
}

// First and longest wait between two dials of a reconnection: the first
// dial goes at once (the path changed; the broker is still there).
const (
	reconnectFirstWait = 250 * time.Millisecond
	reconnectMaxWait   = 2 * time.Second
)

// tracked is a message of a reconnecting run until its outcome is final:
// its current receipt is replaced each time it is published again.
type tracked struct {
	seq     uint32
	size    int
	sendNs  int64
	dueNs   int64
	readyNs int64
	body    []byte

	mu      sync.Mutex
	r       *client.Receipt
	err     error         // the last hand-over failed
	changed chan struct{} // closed when r/err are replaced
}

// current returns the message's receipt, the error of its last hand-over
// and the channel closed when they are replaced.
func (t *tracked) current() (*client.Receipt, <-chan struct{}, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.r, t.changed, t.err
}

func (t *tracked) set(r *client.Receipt, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r, t.err = r, err
	close(t.changed)
	t.changed = make(chan struct{})
}

// accepted reports whether the message's current receipt says acknowledged.
func (t *tracked) accepted() bool {
	r, _, err := t.current()
	if err != nil || r == nil {
		return false
	}
	_, ok := r.Accepted()
	return ok
}

// lostErr reports whether err means the message's connection ended
// before its outcome was known: a new connection may publish it again.
func lostErr(err error) bool {
	return errors.Is(err, client.ErrConnectionLost) || errors.Is(err, client.ErrClosed)
}

// runReconnecting is Run with Reconnect set.
func (p *Publisher) runReconnecting(ctx context.Context, c client.Client) Summary {
	queue := make(chan *tracked, 1024)
	stopWait := make(chan struct{}) // the final wait for receipts is over
	noMore := make(chan struct{})   // no connection will come any more
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for t := range queue {
			p.collectTracked(t, stopWait, noMore)
		}
	}()
	cur := c
	var open []*tracked // published, maybe not yet acknowledged
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(noMore) }) }
	// freeNs is when the loop was last free to send: the previous
	// hand-over's return, or the end of a reconnection (the outage and
	// the resends are the transport's time, not the host's).
	var freeNs int64
	redial := func() {
		if cur, open = p.reconnect(ctx, cur, open); cur == nil {
			end() // the collector fails what is still open
		}
		freeNs = time.Now().UnixNano()
	}
	// send hands t to the collector; while the collector waits for a
	// message of a lost connection, the queue may be full: reconnect then.
	send := func(t *tracked) {
		for cur != nil {
			select {
			case queue <- t:
				return
			case <-cur.Done():
				redial()
			}
		}
		queue <- t
	}
	var start time.Time
	paced := p.o.Interval > 0
	for i := 0; i < p.o.Count && cur != nil; {
		ok, lost := p.slot(ctx, cur, i, start)
		if lost {
			redial()
			continue
		}
		if !ok {
			break
		}
		t := p.publishTracked(ctx, cur, uint32(i))
		returned := time.Now().UnixNano()
		if i == 0 {
			start = time.Unix(0, t.sendNs)
		}
		if paced {
			t.dueNs = start.Add(time.Duration(i) * p.o.Interval).UnixNano()
			t.readyNs = max(t.dueNs, freeNs)
		}
		freeNs = returned
		if open = append(open, t); len(open)%256 == 0 {
			open = slices.DeleteFunc(open, (*tracked).accepted) // keep what a reconnection may resend
		}
		send(t)
		i++
	}
	close(queue)
	var timeout <-chan time.Time
	if p.o.AckWait > 0 {
		tm := time.NewTimer(p.o.AckWait)
		defer tm.Stop()
		timeout = tm.C
	} else {
		close(stopWait)
	}
wait:
	for cur != nil {
		select {
		case <-collected:
			break wait
		case <-timeout:
			break wait
		case <-ctx.Done():
			break wait
		case <-cur.Done():
			if allAccepted(open) {
				break wait
			}
			redial()
		}
	}
	end()
	select {
	case <-stopWait:
	default:
		close(stopWait)
	}
	<-collected
	if cur != nil && cur != c {
		cur.Close() // a connection of its own; the caller closes c
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sum
}

func allAccepted(ts []*tracked) bool {
	for _, t := range ts {
		if !t.accepted() {
			return false
		}
	}
	return true
}

// slot waits until message i may leave. lost is true when the connection
// ended meanwhile (or had ended); ok false when the run must end.
func (p *Publisher) slot(ctx context.Context, c client.Client, i int, start time.Time) (ok, lost bool) {
	select {
	case <-c.Done():
		return false, true
	default:
	}
	if p.o.Interval > 0 && i > 0 {
		if d := time.Until(start.Add(time.Duration(i) * p.o.Interval)); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return false, false
			case <-c.Done():
				return false, true
			}
		}
	}
	return ctx.Err() == nil, false
}

// publishTracked stamps message seq and hands it to c.
func (p *Publisher) publishTracked(ctx context.Context, c client.Client, seq uint32) *tracked {
	body, sendNs := p.stamp(seq)
	t := &tracked{seq: seq, size: len(body), sendNs: sendNs, body: body, changed: make(chan struct{})}
	t.r, t.err = c.Publish(ctx, p.o.Topic, body, client.PublishOptions{QoS: p.o.QoS, Retain: p.o.Retain})
	p.sent(sendNs)
	return t
}

// reconnect replaces the lost connection old: it closes it, dials until a
// new one is accepted or Within has passed, and publishes again what old
// left unacknowledged. It returns the new connection (nil when it gave up)
// and the messages still open.
func (p *Publisher) reconnect(ctx context.Context, old client.Client, open []*tracked) (client.Client, []*tracked) {
	rc := p.o.Reconnect
	ev := ReconnectEvent{Lost: time.Now(), Cause: old.Err()}
	// Close completes every receipt still pending on old, so what was
	// acknowledged before the loss is known below.
	old.Close()
	within := rc.Within
	if within <= 0 {
		within = 30 * time.Second
	}
	dctx, cancel := context.WithDeadline(ctx, ev.Lost.Add(within))
	defer cancel()
	// one dial that hangs (a handshake whose answer never comes) must
	// leave time for the next
	attempt := max(within/3, 5*time.Second)
	wait := reconnectFirstWait
	var nc client.Client
	for nc == nil {
		ev.Attempts++
		actx, acancel := context.WithTimeout(dctx, attempt)
		c, err := rc.Redial(actx)
		acancel()
		if err == nil {
			nc = c
			break
		}
		ev.Err = err
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-dctx.Done():
		}
		t.Stop()
		if dctx.Err() != nil {
			ev.Err = fmt.Errorf("no new connection within %s after the loss (%d attempts): %w", within, ev.Attempts, ev.Err)
			p.event(ev)
			return nil, open
		}
		wait = min(2*wait, reconnectMaxWait)
	}
	ev.Err = nil
	ev.Connected = time.Now()
	ev.Info = nc.ConnectionInfo()
	var still []*tracked
	for _, t := range open {
		if t.accepted() {
			continue
		}
		r, err := nc.Publish(ctx, p.o.Topic, t.body, client.PublishOptions{QoS: p.o.QoS, Retain: p.o.Retain})
		t.set(r, err)
		ev.Resent++
		still = append(still, t)
	}
	p.event(ev)
	return nc, still
}

// event counts a reconnection and passes it on.
func (p *Publisher) event(ev ReconnectEvent) {
	p.mu.Lock()
	p.sum.Reconnects = append(p.sum.Reconnects, ev)
	p.sum.Resent += ev.Resent
	p.mu.Unlock()
	if f := p.o.Reconnect.OnEvent; f != nil {
		f(ev)
	}
}

// collectTracked waits for the final outcome of t: acknowledged, failed for
// a reason a new connection does not change, or still open when the wait
// ends (stop) or no connection will come any more (noMore).
func (p *Publisher) collectTracked(t *tracked, stop, noMore <-chan struct{}) {
	res := Result{Seq: t.seq, Size: t.size, SendNs: t.sendNs, DueNs: t.dueNs, ReadyNs: t.readyNs}
	for {
		r, changed, err := t.current()
		if err == nil && r != nil {
			select {
			case <-r.Done():
				err = r.Err()
			case <-changed:
				continue // published again
			case <-stop:
				res.Err = errors.New("no acknowledgement in time")
			}
			if res.Err != nil {
				break
			}
			if err == nil {
				if at, ok := r.Accepted(); ok {
					res.AcceptedNs = at.UnixNano()
				}
				break
			}
		}
		if !lostErr(err) {
			res.Err = err
			break
		}
		// its connection ended: wait for the next one to publish it again
		select {
		case <-changed:
			continue
		case <-noMore:
		case <-stop:
		}
		// a last look: it may have been published again meanwhile
		if _, ch, _ := t.current(); ch != changed {
			continue
		}
		res.Err = err
		break
	}
	p.mu.Lock()
	p.sum.count(res)
	p.mu.Unlock()
	if p.o.OnResult != nil {
		p.o.OnResult(res)
	}
}
