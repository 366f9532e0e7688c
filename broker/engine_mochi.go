package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// mochiEngine is the engine backed by mochi-mqtt v2.7.9.
type mochiEngine struct {
	srv   *mqtt.Server
	cfg   engineConfig
	log   *slog.Logger
	flow  *flowHook
	store *storeHook // nil without persistence

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup // flow scanner
	connMu   sync.Mutex     // guards closing and conns.Add against conns.Wait
	closing  bool           // set by disconnectAll: no new connections
	active   map[net.Conn]struct{}
	conns    sync.WaitGroup // serveConn calls
}

func newMochiEngine(cfg engineConfig) (*mochiEngine, error) {
	if err := checkMochiLayout(); err != nil {
		return nil, err
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = int32(cfg.flow.QueueLength)
	caps.MaximumInflight = uint16(cfg.flow.MaxInflight)
	caps.MaximumPacketSize = uint32(cfg.flow.MaxPacketSize)
	srv := mqtt.New(&mqtt.Options{
		Capabilities:             caps,
		ClientNetWriteBufferSize: cfg.flow.WriteBuffer,
		ClientNetReadBufferSize:  cfg.flow.ReadBuffer,
		Logger:                   slog.New(engineLogHandler{cfg.logger.Handler()}).With("component", "engine"),
		SysTopicResendInterval:   10,
	})
	e := &mochiEngine{srv: srv, cfg: cfg, log: cfg.logger, stop: make(chan struct{}), active: map[net.Conn]struct{}{}}

	ah := &authHook{a: cfg.auth, srv: srv, maxIDLen: cfg.limits.MaxClientIDLength, log: newRateLimitedLog(cfg.logger, time.Second)}
	if ah.maxIDLen == 0 {
		ah.maxIDLen = DefaultMaxClientIDLen
	}
	if err := srv.AddHook(ah, nil); err != nil {
		return nil, fmt.Errorf("broker: add auth hook: %w", err)
	}
	e.flow = newFlowHook(e)
	if err := srv.AddHook(e.flow, nil); err != nil {
		return nil, fmt.Errorf("broker: add flow hook: %w", err)
	}
	if cfg.storePath != "" {
		st, bopts, err := openStoreHook(cfg.storePath, cfg.inflightPath, cfg.fsync, cfg.logger.With("component", "store"))
		if err != nil {
			return nil, err
		}
		if err := srv.AddHook(st, bopts); err != nil {
			_ = st.Stop()
			return nil, fmt.Errorf("broker: open store %s: %w (is another broker using this state directory?)", cfg.storePath, err)
		}
		e.store = st
	}
	return e, nil
}

func (e *mochiEngine) start() error {
	if err := e.srv.Serve(); err != nil {
		return fmt.Errorf("broker: start engine: %w", err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.flow.scan(e.stop)
	}()
	return nil
}

// connectTimeout bounds the wait for CONNECT on a fresh connection; mochi
// replaces the deadline with the keep-alive deadline once CONNECT arrived.
const connectTimeout = 30 * time.Second

func (e *mochiEngine) serveConn(listener string, c net.Conn) error {
	e.connMu.Lock()
	if e.closing {
		e.connMu.Unlock()
		_ = c.Close()
		return ErrClosed
	}
	e.conns.Add(1)
	e.active[c] = struct{}{}
	e.connMu.Unlock()
	defer func() {
		e.connMu.Lock()
		delete(e.active, c)
		e.connMu.Unlock()
		e.conns.Done()
	}()
	_ = c.SetReadDeadline(time.Now().Add(connectTimeout))
	err := e.srv.EstablishConnection(listener, c)
	_ = c.Close()
	return err
}

func (e *mochiEngine) disconnectAll() {
	e.connMu.Lock()
	e.closing = true
	e.connMu.Unlock()
	for _, cl := range e.srv.Clients.GetAll() {
		if cl.Net.Inline || cl.Closed() {
			continue
		}
		// DisconnectClient writes DISCONNECT (MQTT 5) and stops the client;
		// a client that does not read cannot block us: close its conn
		// after a short grace period.
		done := make(chan struct{})
		go func(cl *mqtt.Client) {
			defer close(done)
			_ = e.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}(cl)
		select {
		case <-done:
		case <-time.After(500 * time.Millisecond):
			cl.Stop(packets.ErrServerShuttingDown)
			<-done
		}
	}
}

func (e *mochiEngine) waitClients(ctx context.Context) error {
	e.connMu.Lock()
	e.closing = true
	e.connMu.Unlock()
	done := make(chan struct{})
	go func() {
		e.conns.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// Force-close whatever is left, then wait for it.
		for _, cl := range e.srv.Clients.GetAll() {
			cl.Stop(packets.ErrServerShuttingDown)
		}
		// Connections that never completed CONNECT are not clients yet.
		e.connMu.Lock()
		for c := range e.active {
			_ = c.Close()
		}
		e.connMu.Unlock()
		<-done
		return ctx.Err()
	}
}

func (e *mochiEngine) close() error {
	e.stopOnce.Do(func() { close(e.stop) })
	e.wg.Wait()
	// mochi's Close stops the hooks, which closes (flushes) the store.
	if err := e.srv.Close(); err != nil {
		return fmt.Errorf("broker: close engine: %w", err)
	}
	return nil
}

func (e *mochiEngine) stats() engineStats {
	i := e.srv.Info
	return engineStats{
		clientsConnected: atomic.LoadInt64(&i.ClientsConnected),
		subscriptions:    atomic.LoadInt64(&i.Subscriptions),
		retained:         atomic.LoadInt64(&i.Retained),
		inflight:         atomic.LoadInt64(&i.Inflight),
		messagesDropped:  atomic.LoadInt64(&i.MessagesDropped),
		inflightDropped:  atomic.LoadInt64(&i.InflightDropped),
	}
}

func (e *mochiEngine) subscriptions(id string) int {
	cl, ok := e.srv.Clients.Get(id)
	if !ok || cl.Closed() {
		return 0
	}
	return cl.State.Subscriptions.Len()
}

// ---- flow control -----------------------------------------------------------

// Why mochi drops QoS 0 messages: a publisher's read goroutine hands each
// message to every subscriber with a non-blocking send on the subscriber's
// outbound channel (Server.publishToClient); when the channel is full the
// message is dropped (Info.MessagesDropped, OnPublishDropped). Nothing slows
// the publisher down, so a publisher whose reads are cheaper than the
// subscriber's writes (one syscall per packet or per 2 KiB buffer) overruns
// the subscriber's queue in bursts and steady state alike.
//
// The fix here: a scanner samples every subscriber's queue depth every
// scanInterval (only while messages flow). When any queue is more than half
// full it raises a pressure flag; then, and only then, the publisher's
// goroutine checks the subscribers of each message in OnPublish and waits
// (bounded by MaxStall) until their queues drain below half. Waiting on the
// publisher's read goroutine stops reading its socket: TCP (or QUIC flow
// control) pushes back on the publishing client instead of the broker
// dropping. A subscriber that stays full for MaxStall is marked stalled (no
// more waiting for it until it drains) and, under PolicyDrop, loses QoS 0
// messages (counted by reason) or, for QoS 1/2 or PolicyDisconnect, is
// disconnected so its session keeps the messages.

const (
	idleScanInterval = 100 * time.Millisecond
	scanInterval     = time.Millisecond
	waitStep         = 100 * time.Microsecond
	restoreWait      = time.Second
)

// errSlowConsumer is the stop cause of a client disconnected by the
// slow-consumer policy.
var errSlowConsumer = errors.New("slow consumer: outbound queue full")

type clientFlow struct {
	cl      *mqtt.Client
	stalled atomic.Bool
	// stashed holds outbound QoS 1/2 messages set aside while an inbound
	// PUBLISH with the same packet identifier is processed (QoS 1) or
	// until its PUBREL (QoS 2); see OnPacketRead. Only the client's read
	// goroutine touches it, except OnDisconnect, which runs there too.
	stashed map[uint16]packets.Packet
	// pending counts stashed messages; a new connection of the same client
	// waits (briefly) for it to reach 0 before it inherits the session.
	pending atomic.Int32
}

type flowHook struct {
	mqtt.HookBase
	e        *mochiEngine
	obs      observer
	capacity int
	high     int // wait while queue length >= high
	low      int // a stalled client recovers below low

	mu      sync.RWMutex
	clients map[string]*clientFlow // by client ID; mu guards the map

	pressure  atomic.Bool
	published atomic.Uint64 // publishes since start; the scanner skips idle periods
	lastScan  atomic.Int64  // UnixNano of the last scan
	scanMu    sync.Mutex    // one scan at a time

	dropLog *rateLimitedLog
}

func newFlowHook(e *mochiEngine) *flowHook {
	c := e.cfg.flow.QueueLength
	return &flowHook{
		e:        e,
		obs:      e.cfg.obs,
		capacity: c,
		high:     max(1, c/2),
		low:      max(1, c/4),
		clients:  map[string]*clientFlow{},
		dropLog:  newRateLimitedLog(e.log, time.Second),
	}
}

func (h *flowHook) ID() string { return "iotq-flow" }

func (h *flowHook) Provides(b byte) bool {
	return bytes.IndexByte([]byte{
		mqtt.OnSessionEstablish,
		mqtt.OnSessionEstablished,
		mqtt.OnDisconnect,
		mqtt.OnPublish,
		mqtt.OnPublished,
		mqtt.OnPublishDropped,
		mqtt.OnPacketSent,
		mqtt.OnQosDropped,
		mqtt.OnPacketIDExhausted,
		mqtt.OnPacketRead,
		mqtt.OnPacketProcessed,
	}, b) >= 0
}

// Packet identifiers: MQTT gives each direction its own identifier space,
// but mochi keeps inbound and outbound QoS state in one map per client, and
// an inbound QoS 1 PUBLISH deletes whatever outbound message waits for its
// PUBACK under the same identifier (mochi issue #545 is the QoS 2 variant):
// a client that publishes and subscribes with QoS 1 would lose messages.
// OnPacketRead sets the outbound message aside; OnPacketProcessed puts it
// back after the inbound QoS 1 PUBLISH or the PUBREL that ends an inbound
// QoS 2 exchange (and into the store, whose copy the inbound processing
// removed). If the client acknowledges the outbound message in between,
// it may be delivered once more after a reconnect: a duplicate, never a
// loss.

func (h *flowHook) flowOf(cl *mqtt.Client) *clientFlow {
	h.mu.RLock()
	f := h.clients[cl.ID]
	h.mu.RUnlock()
	if f == nil || f.cl != cl {
		return nil
	}
	return f
}

func (h *flowHook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos == 0 {
		return pk, nil
	}
	out, ok := cl.State.Inflight.Get(pk.PacketID)
	if !ok || out.FixedHeader.Type == packets.Pubrec {
		return pk, nil // free, or inbound QoS 2 state (mochi handles that)
	}
	if f := h.flowOf(cl); f != nil {
		if f.stashed == nil {
			f.stashed = map[uint16]packets.Packet{}
		}
		if _, dup := f.stashed[pk.PacketID]; !dup {
			f.pending.Add(1)
		}
		f.stashed[pk.PacketID] = out
	}
	return pk, nil
}

func (h *flowHook) OnPacketProcessed(cl *mqtt.Client, pk packets.Packet, err error) {
	switch {
	case pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 1,
		pk.FixedHeader.Type == packets.Pubrel: // end of an inbound QoS 2 exchange
	default:
		return
	}
	if f := h.flowOf(cl); f != nil && len(f.stashed) > 0 {
		h.restore(cl, f, pk.PacketID)
	}
}

// restore puts the stashed outbound message with identifier id back. Read
// goroutine only.
func (h *flowHook) restore(cl *mqtt.Client, f *clientFlow, id uint16) {
	out, ok := f.stashed[id]
	if !ok {
		return
	}
	delete(f.stashed, id)
	if cl.State.Inflight.Set(out) {
		atomic.AddInt64(&h.e.srv.Info.Inflight, 1)
	}
	if h.e.store != nil {
		h.e.store.OnQosPublish(cl, out, out.Created, 0)
	}
	f.pending.Add(-1)
}

// OnSessionEstablish runs on a new connection's goroutine just before it
// inherits the session of an earlier connection with the same client
// identifier. The earlier connection restores set-aside messages right
// after writing its last acknowledgement, and the client may reconnect
// within that instant: wait for the restore (at most restoreWait), so the
// new connection inherits the messages.
func (h *flowHook) OnSessionEstablish(cl *mqtt.Client, pk packets.Packet) {
	h.mu.RLock()
	old := h.clients[cl.ID]
	h.mu.RUnlock()
	if old == nil || old.cl == cl {
		return
	}
	deadline := time.Now().Add(restoreWait)
	for old.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(waitStep)
	}
}

func (h *flowHook) OnSessionEstablished(cl *mqtt.Client, pk packets.Packet) {
	h.mu.Lock()
	h.clients[cl.ID] = &clientFlow{cl: cl}
	h.mu.Unlock()
	h.obs.sessionOpened(cl.Net.Listener)
}

func (h *flowHook) OnDisconnect(cl *mqtt.Client, err error, expire bool) {
	h.mu.Lock()
	f, ok := h.clients[cl.ID]
	registered := ok && f.cl == cl
	if registered {
		delete(h.clients, cl.ID)
	}
	h.mu.Unlock()
	if registered {
		// Exchanges cut short (invalid PUBLISH, no PUBREL): keep the
		// messages in the session.
		if !expire {
			for id := range f.stashed {
				h.restore(cl, f, id)
			}
		}
		h.obs.sessionClosed(cl.Net.Listener)
	}
}

func (h *flowHook) OnPublished(cl *mqtt.Client, pk packets.Packet) {
	h.obs.messageIn(pk.FixedHeader.Qos)
}

func (h *flowHook) OnPacketSent(cl *mqtt.Client, pk packets.Packet, b []byte) {
	if pk.FixedHeader.Type == packets.Publish {
		h.obs.messageOut(pk.FixedHeader.Qos, len(b))
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
// most MaxStall, then applies the slow-consumer policy.
func (h *flowHook) waitFor(sc *mqtt.Client, qos byte) {
	h.mu.RLock()
	f := h.clients[sc.ID]
	h.mu.RUnlock()
	if f == nil || f.cl != sc {
		return
	}
	// A QoS 1/2 delivery takes the subscriber's lock, which its writer
	// holds while a write blocks: a blocked writer stalls the publisher
	// inside the engine, before any queue fills. Treat it as congestion.
	congested := func() bool {
		return outboundLen(sc) >= h.high || (qos > 0 && blockedWriter(sc))
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
	deadline := time.Now().Add(h.e.cfg.flow.MaxStall)
	for congested() {
		if sc.Closed() {
			return
		}
		if time.Now().After(deadline) {
			f.stalled.Store(true)
			h.dropLog.warn("slow consumer: queue full for max_stall", "client", sc.ID, "queue", outboundLen(sc), "max_stall", h.e.cfg.flow.MaxStall)
			if qos > 0 || h.e.cfg.flow.SlowConsumer == PolicyDisconnect {
				h.disconnectSlow(sc, qos)
			}
			return
		}
		time.Sleep(waitStep)
	}
}

func (h *flowHook) disconnectSlow(sc *mqtt.Client, qos byte) {
	if sc.Closed() {
		return
	}
	h.obs.dropped(dropSlowConsumer, qos)
	h.e.log.Warn("disconnecting slow consumer", "client", sc.ID, "policy", h.e.cfg.flow.SlowConsumer, "qos", qos)
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
	for _, f := range h.clients {
		l := outboundLen(f.cl)
		if l >= h.high/2 || blockedWriter(f.cl) {
			pressure = true
		}
		if l < h.low && f.stalled.Load() {
			f.stalled.Store(false)
		}
		if mc, ok := f.cl.Net.Conn.(*meteredConn); ok && mc.writeBlockedFor(now) > h.e.cfg.flow.WriteTimeout {
			stuck = append(stuck, f.cl)
		}
	}
	h.mu.RUnlock()
	h.pressure.Store(pressure)
	for _, cl := range stuck {
		if cl.Closed() {
			continue
		}
		h.obs.dropped(dropSlowConsumer, 0)
		h.e.log.Warn("disconnecting client: a write has been blocked longer than write_timeout", "client", cl.ID, "write_timeout", h.e.cfg.flow.WriteTimeout)
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

// outboundIndex is the field index path of mqtt.Client.State.outbound, the
// per-client outbound queue (a buffered channel). Reading the length of an
// unexported channel through reflect is allowed and cheap; checkMochiLayout
// verifies the layout once, so an engine upgrade that changes it fails
// loudly at New instead of silently disabling flow control.
var outboundIndex = func() []int {
	t := reflect.TypeFor[mqtt.Client]()
	st, ok := t.FieldByName("State")
	if !ok {
		return nil
	}
	ob, ok := st.Type.FieldByName("outbound")
	if !ok || ob.Type.Kind() != reflect.Chan {
		return nil
	}
	return append(append([]int{}, st.Index...), ob.Index...)
}()

func checkMochiLayout() error {
	if outboundIndex == nil {
		return errors.New("broker: mochi-mqtt Client.State.outbound not found: flow control needs mochi-mqtt v2.7.9")
	}
	return nil
}

func outboundLen(cl *mqtt.Client) int {
	return reflect.ValueOf(cl).Elem().FieldByIndex(outboundIndex).Len()
}

// rateLimitedLog logs at most once per interval and reports how many
// messages it suppressed in between.
type rateLimitedLog struct {
	log      *slog.Logger
	interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newRateLimitedLog(l *slog.Logger, every time.Duration) *rateLimitedLog {
	return &rateLimitedLog{log: l, interval: every}
}

func (r *rateLimitedLog) warn(msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < r.interval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed = 0
	r.last = now
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	r.log.Warn(msg, args...)
}

// engineLogHandler tames mochi's logs: its Info lines ("added hook", "mochi
// mqtt starting") become Debug, and the harmless "key not found" error that
// mochi's bolt hook logs on the first start of an empty store is dropped.
type engineLogHandler struct{ slog.Handler }

func (h engineLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l)
}

func (h engineLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	if r.Level == slog.LevelError && r.Message == "failed to get data" {
		notFound := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" && strings.Contains(a.Value.String(), "key not found") {
				notFound = true
			}
			return true
		})
		if notFound {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h engineLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return engineLogHandler{h.Handler.WithAttrs(as)}
}

func (h engineLogHandler) WithGroup(name string) slog.Handler {
	return engineLogHandler{h.Handler.WithGroup(name)}
}
