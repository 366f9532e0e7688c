package mochi

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"github.com/iotq/iotq/internal/mqttname"
)

// Why mochi drops QoS 0 messages: a publisher's read goroutine hands each
// message to every subscriber with a non-blocking send on the subscriber's
// outbound channel (Server.publishToClient); when the channel is full the
// message is dropped (Info.MessagesDropped, OnPublishDropped). Nothing slows
// the publisher down, so a publisher whose reads are cheaper than the
// subscriber's writes (one syscall per packet or per 2 KiB buffer) overruns
// the subscriber's queue in bursts and steady state alike.
//
// The fix here, in two layers:
//   - Soft: a scanner samples every subscriber's queue depth and queued
//     bytes every scanInterval (only while messages flow). When any queue
//     is more than a quarter full it raises a pressure flag; then, and only
//     then, the publisher's goroutine checks the subscribers of each message
//     in OnPublish and waits while a queue is at least half full (or holds
//     half of limits.max_queued_bytes).
//   - Hard: when a message does not fit a queue (or the queued-bytes limit)
//     the engine asks this hook (Options.OutboundFull and QueuedBytesFull,
//     fork patches 9 and 10) and the publisher waits for room right there.
//     A burst that fills a queue between two samples is held back, not
//     dropped.
//
// Every wait is woken by the subscriber's progress (its writer finished a
// packet, it acknowledged a QoS 1/2 message, or it disconnected), never by
// polling. Waiting on the publisher's read goroutine stops reading its
// socket: TCP (or QUIC flow control) pushes back on the publishing client
// instead of the broker dropping. A subscriber is judged stalled by lack of
// progress, never by queue depth: a wait gives up when the subscriber made
// no progress for MaxStall (a subscriber that keeps making progress paces
// its publishers; that is backpressure). A stalled subscriber is marked
// (no more waiting for it until it drains) and, under engine.PolicyDrop, loses
// QoS 0 messages (counted by reason) or, for QoS 1/2 or engine.PolicyDisconnect,
// is disconnected so its session keeps the messages. A message that would
// take a session past max_queued_bytes while its client is offline or
// stalled is not delivered to it (counted as queued_bytes).

const (
	idleScanInterval = 100 * time.Millisecond
	scanInterval     = time.Millisecond
)

// errSlowConsumer is the stop cause of a client disconnected by the
// slow-consumer policy.
var errSlowConsumer = errors.New("slow consumer: outbound queue full")

// clientFlow is the flow-control state of one connection.
type clientFlow struct {
	cl      *mqttcore.Client
	stalled atomic.Bool
	// progress is notified whenever the client's writer finished a packet,
	// the client acknowledged a QoS 1/2 message or it disconnected:
	// waiting publishers re-check.
	progress signal
}

type flowHook struct {
	mqttcore.HookBase
	e        *Engine
	obs      engine.Observer
	capacity int
	high     int   // wait while queue length >= high
	low      int   // a stalled client recovers below low
	maxBytes int64 // limits.max_queued_bytes; 0: no limit

	// clients is for the scanner; a packet finds its client's state in
	// the client (slotFlow).
	mu      sync.RWMutex
	clients map[*mqttcore.Client]*clientFlow

	pressure  atomic.Bool
	published atomic.Uint64 // publishes since start; the scanner skips idle periods
	lastScan  atomic.Int64  // UnixNano of the last scan
	scanMu    sync.Mutex    // one scan at a time

	dropLog *rateLimitedLog
	slowLog *rateLimitedLog
}

func newFlowHook(e *Engine) *flowHook {
	c := e.cfg.Flow.QueueLength
	return &flowHook{
		e:        e,
		obs:      e.cfg.Obs,
		capacity: c,
		high:     max(1, c/2),
		low:      max(1, c/4),
		maxBytes: max(0, int64(e.cfg.Limits.MaxQueuedBytes)),
		clients:  map[*mqttcore.Client]*clientFlow{},
		dropLog:  newRateLimitedLog(e.log, time.Second),
		slowLog:  newRateLimitedLog(e.log, time.Second),
	}
}

func (h *flowHook) ID() string { return "iotq-flow" }

func (h *flowHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{
		mqttcore.OnSessionEstablished,
		mqttcore.OnDisconnect,
		mqttcore.OnPublish,
		mqttcore.OnPublished,
		mqttcore.OnPublishDropped,
		mqttcore.OnPacketSent,
		mqttcore.OnQosComplete,
		mqttcore.OnQosDropped,
		mqttcore.OnPacketIDExhausted,
	}, b) >= 0
}

func (h *flowHook) flowOf(cl *mqttcore.Client) *clientFlow {
	f, _ := cl.Attached(slotFlow).(*clientFlow)
	return f
}

func (h *flowHook) OnSessionEstablished(cl *mqttcore.Client, pk packets.Packet) {
	f := &clientFlow{cl: cl}
	h.mu.Lock()
	h.clients[cl] = f
	h.mu.Unlock()
	cl.Attach(slotFlow, f)
	h.obs.SessionOpened(cl.Net.Listener)
}

func (h *flowHook) OnDisconnect(cl *mqttcore.Client, err error, expire bool) {
	h.mu.Lock()
	f, ok := h.clients[cl]
	delete(h.clients, cl)
	h.mu.Unlock()
	cl.Attach(slotFlow, nil)
	if ok {
		f.progress.notify()
		h.obs.SessionClosed(cl.Net.Listener)
	}
}

func (h *flowHook) OnPublished(cl *mqttcore.Client, pk packets.Packet) {
	h.obs.MessageIn(pk.FixedHeader.Qos)
}

// OnPacketSent runs on the client's writer after each packet: count it and
// wake publishers waiting for this client's queue to drain.
func (h *flowHook) OnPacketSent(cl *mqttcore.Client, pk packets.Packet, b []byte) {
	if pk.FixedHeader.Type == packets.Publish {
		h.obs.MessageOut(pk.FixedHeader.Qos, len(b))
	}
	if f := h.flowOf(cl); f != nil {
		f.progress.notify()
	}
}

// OnQosComplete runs when the client acknowledged a QoS 1/2 message (its
// session holds fewer bytes): progress.
func (h *flowHook) OnQosComplete(cl *mqttcore.Client, pk packets.Packet) {
	if f := h.flowOf(cl); f != nil {
		f.progress.notify()
	}
}

// OnPublishDropped is called on the publisher's goroutine when mochi did
// not fit a message into a subscriber's outbound queue. A QoS 0 drop is
// counted and logged. A QoS 1/2 message is not lost: it is put back into
// the subscriber's session (in-flight store, persisted if a store is
// configured) and the slow subscriber is disconnected, so it receives the
// message when it reconnects.
func (h *flowHook) OnPublishDropped(cl *mqttcore.Client, pk packets.Packet) {
	qos := byte(0)
	if pk.FixedHeader.Qos > 0 {
		var kept bool
		if kept, qos = h.keepForRedelivery(cl, pk); kept {
			return
		}
	}
	h.drop(engine.DropQueueFull, cl.ID, pk.TopicName, qos)
}

// keepForRedelivery stores pk in cl's session for redelivery and
// disconnects cl. It reports false if pk was a QoS 0 delivery for cl or
// could not be stored, and the QoS of the delivery to cl.
func (h *flowHook) keepForRedelivery(cl *mqttcore.Client, pk packets.Packet) (bool, byte) {
	var qos byte
	matched := false
	for filter, sub := range cl.State.Subscriptions.GetAll() {
		if strings.HasPrefix(filter, "$share/") {
			if _, rest, ok := strings.Cut(filter[len("$share/"):], "/"); ok {
				filter = rest
			}
		}
		if mqttname.Match(filter, pk.TopicName) {
			qos = max(qos, sub.Qos)
			matched = true
		}
	}
	qos = min(qos, pk.FixedHeader.Qos)
	if !matched || qos == 0 {
		return false, qos
	}
	out := pk.Copy(false)
	out.FixedHeader.Qos = qos
	out.FixedHeader.Retain = false
	id, err := cl.NextPacketID()
	if err != nil {
		return false, qos
	}
	out.PacketID = uint16(id)
	if !cl.State.Inflight.SetSeq(&out) {
		return false, qos
	}
	atomic.AddInt64(&h.e.srv.Info.Inflight, 1)
	if h.e.store != nil {
		h.e.store.OnQosPublish(cl, out, out.Created, 0)
	}
	h.disconnectSlow(cl, qos)
	return true, qos
}

// OnQosDropped is called by mochi for real expiries (twice: once with the
// message, once with a bare packet carrying only the id) and also when a
// session ends or is taken over (not a loss: the client chose a clean
// session, or the new connection inherited the messages). Only the bare
// expiry notification, which comes from the expiry sweep alone, counts.
func (h *flowHook) OnQosDropped(cl *mqttcore.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != 0 || cl.IsTakenOver() {
		return
	}
	h.drop(engine.DropExpired, cl.ID, "", 1)
}

func (h *flowHook) OnPacketIDExhausted(cl *mqttcore.Client, pk packets.Packet) {
	h.drop(engine.DropPacketIDs, cl.ID, pk.TopicName, pk.FixedHeader.Qos)
}

func (h *flowHook) drop(reason, client, topic string, qos byte) {
	h.obs.Dropped(reason, qos)
	h.dropLog.warn("message dropped", "reason", reason, "client", client, "topic", topic, "qos", qos)
}

// OnPublish runs on the publisher's read goroutine before the message is
// handed to subscribers: the only place where waiting slows the publisher.
func (h *flowHook) OnPublish(cl *mqttcore.Client, pk packets.Packet) (packets.Packet, error) {
	if h.published.Add(1)%16 == 0 {
		h.maybeScan()
	}
	if !h.pressure.Load() || h.e.cfg.Flow.NoBackpressure {
		return pk, nil
	}
	subs := h.e.srv.Topics.Subscribers(pk.TopicName)
	for id, sub := range subs.Subscriptions {
		sc, ok := h.e.srv.Clients.Get(id)
		// A client subscribed to its own messages is not waited for: its
		// acknowledgements come in on the goroutine that would wait.
		if !ok || sc.Closed() || sc == cl {
			continue
		}
		qos := min(pk.FixedHeader.Qos, sub.Qos)
		h.waitFor(cl, sc, qos)
	}
	return pk, nil
}

// congested reports whether sc should hold its publishers back: its queue
// is at least half full, it holds at least half of max_queued_bytes, or (for
// QoS 1/2) its writer is blocked: a blocked writer cannot take more.
func (h *flowHook) congested(sc *mqttcore.Client, qos byte) bool {
	return sc.OutboundLen() >= h.high ||
		(h.maxBytes > 0 && sc.QueuedBytes() >= h.maxBytes/2) ||
		(qos > 0 && blockedWriter(sc))
}

// waitFor holds pub, the publisher, on its reader while sc is congested
// and making progress, then applies the slow-consumer policy if sc
// stalled.
func (h *flowHook) waitFor(pub, sc *mqttcore.Client, qos byte) {
	f := h.flowOf(sc)
	if f == nil || !h.congested(sc, qos) {
		return
	}
	// The reader may hold sc's writing itself (the deliveries of the
	// input it handles): sc makes no progress while the reader waits
	// unless a write goroutine takes it over.
	pub.ReleaseWrites()
	if f.stalled.Load() || !h.awaitProgress(f, func() bool { return !h.congested(sc, qos) }) {
		if qos > 0 || h.e.cfg.Flow.SlowConsumer == engine.PolicyDisconnect {
			h.disconnectSlow(sc, qos)
		}
	}
}

// awaitProgress waits until ok() holds or the client disconnected (true),
// or until the client made no progress for MaxStall (false: the client is
// marked stalled, counted and logged). Every progress event re-arms the
// MaxStall timer: a subscriber is stalled when it stops making progress,
// not when its queue is momentarily full.
func (h *flowHook) awaitProgress(f *clientFlow, ok func() bool) bool {
	maxStall := h.e.cfg.Flow.MaxStall
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		woken := f.progress.wait()
		if ok() || f.cl.Closed() {
			return true
		}
		if timer == nil {
			// Waiting: let the next publishes check their subscribers
			// before handing messages over (OnPublish), without waiting
			// for the scanner to notice.
			h.pressure.Store(true)
			timer = time.NewTimer(maxStall)
		}
		select {
		case <-woken:
			timer.Reset(maxStall)
		case <-timer.C:
			f.stalled.Store(true)
			h.obs.Stalled()
			h.slowLog.warn("slow consumer: no progress for max_stall", "client", f.cl.ID, "queue", f.cl.OutboundLen(), "queued_bytes", f.cl.QueuedBytes(), "max_stall", maxStall)
			return false
		}
	}
}

// outboundFull is the engine's Options.OutboundFull: pk does not fit cl's
// queue. The publisher waits for room while cl makes progress; true: try
// again (room, or cl was disconnected and its session keeps a QoS 1/2
// message); false: drop (QoS 0 under engine.PolicyDrop, counted by
// OnPublishDropped).
func (h *flowHook) outboundFull(cl *mqttcore.Client, pk packets.Packet) bool {
	f := h.flowOf(cl)
	if f == nil || h.e.cfg.Flow.NoBackpressure {
		return cl.Closed()
	}
	qos := pk.FixedHeader.Qos
	if !f.stalled.Load() && h.awaitProgress(f, func() bool { return cl.OutboundLen() < h.capacity }) {
		return true
	}
	if qos > 0 || h.e.cfg.Flow.SlowConsumer == engine.PolicyDisconnect {
		h.disconnectSlow(cl, qos)
		return true
	}
	return false
}

// queuedBytesFull is the engine's Options.QueuedBytesFull: pk would take
// cl's session past max_queued_bytes. A connected client that makes
// progress holds the publisher until pk fits (true); for an offline or
// stalled client pk is not delivered to it, counted as queued_bytes
// (false). Messages already queued are never removed.
func (h *flowHook) queuedBytesFull(cl *mqttcore.Client, pk packets.Packet) bool {
	qos := pk.FixedHeader.Qos
	if qos == 0 && cl.Closed() {
		return false // QoS 0 is never queued for an offline session: nothing to count
	}
	// A client subscribed to its own messages is not waited for: its
	// acknowledgements come in on the goroutine that would wait.
	if f := h.flowOf(cl); f != nil && !cl.Closed() && !f.stalled.Load() && !h.e.cfg.Flow.NoBackpressure && pk.Origin != cl.ID {
		size := mqttcore.QueuedCost(&pk) // as the engine counts it (payload, topic, properties and structure)
		fits := func() bool { q := cl.QueuedBytes(); return q == 0 || q+size <= h.maxBytes }
		if h.awaitProgress(f, fits) && !cl.Closed() {
			return true
		}
	}
	h.drop(engine.DropQueuedBytes, cl.ID, pk.TopicName, qos)
	return false
}

func (h *flowHook) disconnectSlow(sc *mqttcore.Client, qos byte) {
	if sc.Closed() {
		return
	}
	h.obs.Dropped(engine.DropSlowConsumer, qos)
	h.slowLog.warn("disconnecting slow consumer", "client", sc.ID, "policy", h.e.cfg.Flow.SlowConsumer, "qos", qos)
	// Stop closes the connection: it never blocks on the slow peer.
	sc.Stop(errSlowConsumer)
}

// scan samples queue depths until stop is closed.
func (h *flowHook) scan(stop <-chan struct{}) {
	// Tick every scanInterval while messages flow, every idleScanInterval
	// otherwise: an idle broker wakes up 10 times a second, not 1000.
	t := time.NewTimer(idleScanInterval)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		n := h.published.Load()
		busy := n != last || h.pressure.Load()
		last = n
		h.scanOnce()
		if busy {
			t.Reset(scanInterval)
		} else {
			t.Reset(idleScanInterval)
		}
	}
}

// maybeScan lets a publisher run the scan itself when the scanner is late:
// on a saturated machine the scanner goroutine can wait tens of
// milliseconds for a CPU, while the publishers that fill the queues keep
// running.
func (h *flowHook) maybeScan() {
	now := time.Now().UnixNano()
	last := h.lastScan.Load()
	if now-last < int64(scanInterval) || !h.lastScan.CompareAndSwap(last, now) {
		return
	}
	h.scanOnce()
}

// scanOnce samples every queue, sets the pressure flag and clears stalled
// marks of drained queues. Concurrent calls are skipped.
func (h *flowHook) scanOnce() {
	if !h.scanMu.TryLock() {
		return
	}
	defer h.scanMu.Unlock()
	h.lastScan.Store(time.Now().UnixNano())
	pressure := false
	var stuck []*mqttcore.Client
	now := time.Now().UnixNano()
	h.mu.RLock()
	for cl, f := range h.clients {
		l := cl.OutboundLen()
		var b int64
		if h.maxBytes > 0 {
			b = cl.QueuedBytes()
		}
		if l >= h.high/2 || b >= h.maxBytes/4 && h.maxBytes > 0 || blockedWriter(cl) {
			pressure = true
		}
		if l < h.low && b < h.maxBytes/4+1 && f.stalled.Load() {
			f.stalled.Store(false)
		}
		if ww, ok := cl.Net.Conn.(engine.WriteWatcher); ok && ww.WriteBlockedFor(now) > h.e.cfg.Flow.WriteTimeout {
			stuck = append(stuck, cl)
		}
	}
	h.mu.RUnlock()
	h.pressure.Store(pressure)
	for _, cl := range stuck {
		if cl.Closed() {
			continue
		}
		h.obs.Dropped(engine.DropSlowConsumer, 0)
		h.slowLog.warn("disconnecting client: a write has been blocked longer than write_timeout", "client", cl.ID, "write_timeout", h.e.cfg.Flow.WriteTimeout)
		cl.Stop(errSlowConsumer)
	}
}

// blockThreshold is how long a write may block before its client counts as
// congested.
const blockThreshold = 20 * time.Millisecond

// blockedWriter reports whether cl's connection has had a write blocked for
// more than blockThreshold.
func blockedWriter(cl *mqttcore.Client) bool {
	ww, ok := cl.Net.Conn.(engine.WriteWatcher)
	return ok && ww.WriteBlockedFor(time.Now().UnixNano()) > blockThreshold
}
