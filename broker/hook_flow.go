package broker

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Why mochi drops QoS 0 messages: a publisher's read goroutine hands each
// message to every subscriber with a non-blocking send on the subscriber's
// outbound channel (Server.publishToClient); when the channel is full the
// message is dropped (Info.MessagesDropped, OnPublishDropped). Nothing slows
// the publisher down, so a publisher whose reads are cheaper than the
// subscriber's writes (one syscall per packet or per 2 KiB buffer) overruns
// the subscriber's queue in bursts and steady state alike.
//
// The fix here: a scanner samples every subscriber's queue depth
// (Client.OutboundLen, a patch of our mochi fork) every scanInterval (only
// while messages flow). When any queue is more than a quarter full it raises
// a pressure flag; then, and only then, the publisher's goroutine checks the
// subscribers of each message in OnPublish and waits (bounded by MaxStall)
// until their queues drain below half. The wait is woken by the
// subscriber's writer (OnPacketSent) or its disconnection, not by polling.
// Waiting on the publisher's read goroutine stops reading its socket: TCP
// (or QUIC flow control) pushes back on the publishing client instead of the
// broker dropping. A subscriber that stays full for MaxStall is marked
// stalled (no more waiting for it until it drains) and, under PolicyDrop,
// loses QoS 0 messages (counted by reason) or, for QoS 1/2 or
// PolicyDisconnect, is disconnected so its session keeps the messages.

const (
	idleScanInterval = 100 * time.Millisecond
	scanInterval     = time.Millisecond
)

// errSlowConsumer is the stop cause of a client disconnected by the
// slow-consumer policy.
var errSlowConsumer = errors.New("slow consumer: outbound queue full")

// clientFlow is the flow-control state of one connection.
type clientFlow struct {
	cl      *mqtt.Client
	stalled atomic.Bool
	// progress is notified whenever the client's writer finished a packet
	// or the client disconnected: waiting publishers re-check.
	progress signal
}

type flowHook struct {
	mqtt.HookBase
	e        *mochiEngine
	obs      observer
	capacity int
	high     int // wait while queue length >= high
	low      int // a stalled client recovers below low

	mu      sync.RWMutex
	clients map[*mqtt.Client]*clientFlow

	pressure  atomic.Bool
	published atomic.Uint64 // publishes since start; the scanner skips idle periods
	lastScan  atomic.Int64  // UnixNano of the last scan
	scanMu    sync.Mutex    // one scan at a time

	dropLog *rateLimitedLog
	slowLog *rateLimitedLog
}

func newFlowHook(e *mochiEngine) *flowHook {
	c := e.cfg.flow.QueueLength
	return &flowHook{
		e:        e,
		obs:      e.cfg.obs,
		capacity: c,
		high:     max(1, c/2),
		low:      max(1, c/4),
		clients:  map[*mqtt.Client]*clientFlow{},
		dropLog:  newRateLimitedLog(e.log, time.Second),
		slowLog:  newRateLimitedLog(e.log, time.Second),
	}
}

func (h *flowHook) ID() string { return "iotq-flow" }

func (h *flowHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{
		mqtt.OnSessionEstablished,
		mqtt.OnDisconnect,
		mqtt.OnPublish,
		mqtt.OnPublished,
		mqtt.OnPublishDropped,
		mqtt.OnPacketSent,
		mqtt.OnQosDropped,
		mqtt.OnPacketIDExhausted,
	}, b) >= 0
}

func (h *flowHook) flowOf(cl *mqtt.Client) *clientFlow {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.clients[cl]
}

func (h *flowHook) OnSessionEstablished(cl *mqtt.Client, pk packets.Packet) {
	h.mu.Lock()
	h.clients[cl] = &clientFlow{cl: cl}
	h.mu.Unlock()
	h.obs.sessionOpened(cl.Net.Listener)
}

func (h *flowHook) OnDisconnect(cl *mqtt.Client, err error, expire bool) {
	h.mu.Lock()
	f, ok := h.clients[cl]
	delete(h.clients, cl)
	h.mu.Unlock()
	if ok {
		f.progress.notify()
		h.obs.sessionClosed(cl.Net.Listener)
	}
}

func (h *flowHook) OnPublished(cl *mqtt.Client, pk packets.Packet) {
	h.obs.messageIn(pk.FixedHeader.Qos)
}

// OnPacketSent runs on the client's writer after each packet: count it and
// wake publishers waiting for this client's queue to drain.
func (h *flowHook) OnPacketSent(cl *mqtt.Client, pk packets.Packet, b []byte) {
	if pk.FixedHeader.Type == packets.Publish {
		h.obs.messageOut(pk.FixedHeader.Qos, len(b))
	}
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
func (h *flowHook) OnPublishDropped(cl *mqtt.Client, pk packets.Packet) {
	qos := byte(0)
	if pk.FixedHeader.Qos > 0 {
		var kept bool
		if kept, qos = h.keepForRedelivery(cl, pk); kept {
			return
		}
	}
	h.drop(dropQueueFull, cl.ID, pk.TopicName, qos)
}

// keepForRedelivery stores pk in cl's session for redelivery and
// disconnects cl. It reports false if pk was a QoS 0 delivery for cl or
// could not be stored, and the QoS of the delivery to cl.
func (h *flowHook) keepForRedelivery(cl *mqtt.Client, pk packets.Packet) (bool, byte) {
	var qos byte
	matched := false
	for filter, sub := range cl.State.Subscriptions.GetAll() {
		if strings.HasPrefix(filter, "$share/") {
			if _, rest, ok := strings.Cut(filter[len("$share/"):], "/"); ok {
				filter = rest
			}
		}
		if MatchTopic(filter, pk.TopicName) {
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
	if !cl.State.Inflight.Set(out) {
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
func (h *flowHook) OnQosDropped(cl *mqtt.Client, pk packets.Packet) {
	if pk.FixedHeader.Type != 0 || cl.IsTakenOver() {
		return
	}
	h.drop(dropExpired, cl.ID, "", 1)
}

func (h *flowHook) OnPacketIDExhausted(cl *mqtt.Client, pk packets.Packet) {
	h.drop(dropPacketIDs, cl.ID, pk.TopicName, pk.FixedHeader.Qos)
}

func (h *flowHook) drop(reason, client, topic string, qos byte) {
	h.obs.dropped(reason, qos)
	h.dropLog.warn("message dropped", "reason", reason, "client", client, "topic", topic, "qos", qos)
}

// OnPublish runs on the publisher's read goroutine before the message is
// handed to subscribers: the only place where waiting slows the publisher.
func (h *flowHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if h.published.Add(1)%16 == 0 {
		h.maybeScan()
	}
	if !h.pressure.Load() || h.e.cfg.flow.NoBackpressure {
		return pk, nil
	}
	subs := h.e.srv.Topics.Subscribers(pk.TopicName)
	for id, sub := range subs.Subscriptions {
		sc, ok := h.e.srv.Clients.Get(id)
		if !ok || sc.Closed() {
			continue
		}
		qos := min(pk.FixedHeader.Qos, sub.Qos)
		h.waitFor(sc, qos)
	}
	return pk, nil
}

// waitFor holds the caller while sc's queue is at least half full, for at
// most MaxStall, then applies the slow-consumer policy. sc's writer wakes
// it after every packet it writes.
func (h *flowHook) waitFor(sc *mqtt.Client, qos byte) {
	f := h.flowOf(sc)
	if f == nil {
		return
	}
	// A blocked writer cannot take more: treat it as congestion, so the
	// publisher waits here (bounded) rather than filling the queue.
	congested := func() bool {
		return sc.OutboundLen() >= h.high || (qos > 0 && blockedWriter(sc))
	}
	if !congested() {
		return
	}
	if f.stalled.Load() {
		if qos > 0 || h.e.cfg.flow.SlowConsumer == PolicyDisconnect {
			h.disconnectSlow(sc, qos)
		}
		return
	}
	deadline := time.NewTimer(h.e.cfg.flow.MaxStall)
	defer deadline.Stop()
	// Every way out of congestion is an event: the writer finished a
	// packet (the queue shrank, or a blocked write completed) or the
	// client disconnected.
	for {
		woken := f.progress.wait()
		if !congested() || sc.Closed() {
			return
		}
		select {
		case <-woken:
		case <-deadline.C:
			f.stalled.Store(true)
			h.obs.stalled()
			h.slowLog.warn("slow consumer: queue full for max_stall", "client", sc.ID, "queue", sc.OutboundLen(), "max_stall", h.e.cfg.flow.MaxStall)
			if qos > 0 || h.e.cfg.flow.SlowConsumer == PolicyDisconnect {
				h.disconnectSlow(sc, qos)
			}
			return
		}
	}
}

func (h *flowHook) disconnectSlow(sc *mqtt.Client, qos byte) {
	if sc.Closed() {
		return
	}
	h.obs.dropped(dropSlowConsumer, qos)
	h.slowLog.warn("disconnecting slow consumer", "client", sc.ID, "policy", h.e.cfg.flow.SlowConsumer, "qos", qos)
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
	var stuck []*mqtt.Client
	now := time.Now().UnixNano()
	h.mu.RLock()
	for cl, f := range h.clients {
		l := cl.OutboundLen()
		if l >= h.high/2 || blockedWriter(cl) {
			pressure = true
		}
		if l < h.low && f.stalled.Load() {
			f.stalled.Store(false)
		}
		if mc, ok := cl.Net.Conn.(*meteredConn); ok && mc.writeBlockedFor(now) > h.e.cfg.flow.WriteTimeout {
			stuck = append(stuck, cl)
		}
	}
	h.mu.RUnlock()
	h.pressure.Store(pressure)
	for _, cl := range stuck {
		if cl.Closed() {
			continue
		}
		h.obs.dropped(dropSlowConsumer, 0)
		h.slowLog.warn("disconnecting client: a write has been blocked longer than write_timeout", "client", cl.ID, "write_timeout", h.e.cfg.flow.WriteTimeout)
		cl.Stop(errSlowConsumer)
	}
}

// blockThreshold is how long a write may block before its client counts as
// congested.
const blockThreshold = 20 * time.Millisecond

// blockedWriter reports whether cl's connection has had a write blocked for
// more than blockThreshold.
func blockedWriter(cl *mqtt.Client) bool {
	mc, ok := cl.Net.Conn.(*meteredConn)
	return ok && mc.writeBlockedFor(time.Now().UnixNano()) > blockThreshold
}
