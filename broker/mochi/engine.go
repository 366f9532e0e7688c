package mochi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Engine implements engine.Engine on mochi-mqtt v2.7.9, carried as a
// patched fork in internal/mqttcore (see internal/mqttcore/PATCHES.md and
// docs/broker.md, "Engine"); the hooks that shape it are listed in doc.go.
type Engine struct {
	srv   *mqttcore.Server
	cfg   engine.Config
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

	localSubID atomic.Int64 // identifiers of local subscriptions
}

func New(cfg engine.Config) (*Engine, error) {
	caps := mqttcore.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = int32(cfg.Flow.QueueLength)
	caps.MaximumInflight = uint16(cfg.Flow.MaxInflight)
	caps.MaximumPacketSize = uint32(cfg.Flow.MaxPacketSize)
	// A message without a Message Expiry Interval does not expire (MQTT 5
	// section 3.3.2.3.3), queued or retained, as in Mosquitto; a session's
	// messages are bounded by limits.max_queued_bytes and max_inflight.
	// mochi's default dropped every message a day after it was published,
	// retained ones included.
	caps.MaximumMessageExpiryInterval = 0
	// Acknowledgements carry the broker's own properties only, never the
	// PUBLISH's (user properties echoed back cost bytes on every QoS 1
	// message).
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	// A subscription the ACL refuses gets 0x80 "unspecified error" in
	// MQTT 5 too, as in 3.1.1, not 0x87: both are valid, 0x80 does not
	// tell which topics a rule guards, and the Paho interoperability suite
	// expects it (test_subscribe_failure).
	caps.Compatibilities.ObscureNotAuthorized = true
	caps.MaximumClientSubscriptions = cfg.Limits.MaxSubscriptions
	caps.MaximumClientQueuedBytes = max(0, int64(cfg.Limits.MaxQueuedBytes))
	// Before CONNECT is accepted a connection may send at most this much
	// (fork patch 23): a CONNECT of any real client is far smaller.
	caps.MaximumConnectPacketSize = min(uint32(cfg.Flow.MaxPacketSize), maxConnectPacketSize)
	srv := mqttcore.New(&mqttcore.Options{
		Capabilities:             caps,
		ClientNetWriteBufferSize: cfg.Flow.WriteBuffer,
		ClientNetReadBufferSize:  cfg.Flow.ReadBuffer,
		Logger:                   slog.New(newEngineLogHandler(cfg.Logger.Handler())).With("component", "engine"),
		SysTopicResendInterval:   10,
		InlineClient:             true, // Server.Publish and Server.Subscribe
		ParkIdleAfter:            max(0, cfg.Flow.ParkIdleAfter),
	})
	e := &Engine{srv: srv, cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), active: map[net.Conn]struct{}{}}

	ah := &authHook{a: cfg.Auth, srv: srv, maxIDLen: cfg.Limits.MaxClientIDLength, maxKeep: uint16(cfg.Limits.MaxKeepAlive / time.Second), maxSubs: caps.MaximumClientSubscriptions, obs: cfg.Obs, log: newRateLimitedLog(cfg.Logger, time.Second), pubLog: newRateLimitedLog(cfg.Logger, time.Second)}
	if err := srv.AddHook(ah, nil); err != nil {
		return nil, fmt.Errorf("broker: add auth hook: %w", err)
	}
	e.flow = newFlowHook(e)
	srv.Options.InflightFull = func(cl *mqttcore.Client, pk packets.Packet) {
		e.flow.drop(engine.DropInflightFull, cl.ID, pk.TopicName, pk.FixedHeader.Qos)
	}
	srv.Options.OutboundFull = e.flow.outboundFull
	srv.Options.QueuedBytesFull = e.flow.queuedBytesFull
	if err := srv.AddHook(e.flow, nil); err != nil {
		return nil, fmt.Errorf("broker: add flow hook: %w", err)
	}
	if err := srv.AddHook(new(receiveMaxHook), nil); err != nil {
		return nil, fmt.Errorf("broker: add receive-maximum hook: %w", err)
	}
	if cfg.StorePath != "" {
		st, bopts, err := openStoreHook(cfg.StorePath, cfg.InflightPath, cfg.Fsync, cfg.Logger.With("component", "store"))
		if err != nil {
			return nil, err
		}
		if err := srv.AddHook(st, bopts); err != nil {
			_ = st.Stop()
			return nil, fmt.Errorf("broker: open store %s: %w (is another broker using this state directory?)", cfg.StorePath, err)
		}
		e.store = st
		// Acknowledge QoS 1/2 publishes only once their copies are stored.
		srv.Options.AckAfter = func(_ *mqttcore.Client, send func()) { st.afterCommit(send) }
	}
	return e, nil
}

func (e *Engine) Start() error {
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

// maxConnectPacketSize bounds a connection's first packet (CONNECT), before
// the client is known, like RabbitMQ (65 536) and EMQX (64 KB) do:
// client identifier (at most limits.max_client_id_length), user name,
// password, Will topic, Will payload and properties of any real client
// fit, and an unauthenticated connection cannot make the broker hold more.
const maxConnectPacketSize = 64 << 10

// connectTimeout bounds the wait for CONNECT on a fresh connection; mochi
// replaces the deadline with the keep-alive deadline once CONNECT arrived.
const connectTimeout = 30 * time.Second

func (e *Engine) ServeConn(listener string, c net.Conn, ended func(error)) {
	// Small frame: this goroutine may wait here for an idle client's whole
	// life (see Server.serveConn).
	if !e.track(c) {
		ended(engine.ErrShuttingDown)
		return
	}
	// An idle client on a plain TCP connection gives its goroutine up
	// (mochi fork patch 18); ended then runs on the goroutine that
	// continues it.
	e.srv.ServeConnection(listener, c, func(err error) {
		e.untrack(c)
		ended(err)
	})
}

// track registers c as active and sets its CONNECT deadline; it closes c
// and reports false when the engine is closing.
//
//go:noinline
func (e *Engine) track(c net.Conn) bool {
	e.connMu.Lock()
	if e.closing {
		e.connMu.Unlock()
		_ = c.Close()
		return false
	}
	e.conns.Add(1)
	e.active[c] = struct{}{}
	e.connMu.Unlock()
	_ = c.SetReadDeadline(time.Now().Add(connectTimeout))
	return true
}

// untrack closes c and removes it from the active set.
//
//go:noinline
func (e *Engine) untrack(c net.Conn) {
	_ = c.Close()
	e.connMu.Lock()
	delete(e.active, c)
	e.connMu.Unlock()
	e.conns.Done()
}

func (e *Engine) DisconnectAll() {
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
		go func(cl *mqttcore.Client) {
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

func (e *Engine) WaitClients(ctx context.Context) error {
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

func (e *Engine) Close() error {
	e.stopOnce.Do(func() { close(e.stop) })
	e.wg.Wait()
	// mochi's Close stops the hooks, which closes (flushes) the store.
	if err := e.srv.Close(); err != nil {
		return fmt.Errorf("broker: close engine: %w", err)
	}
	return nil
}

func (e *Engine) Stats() engine.Stats {
	i := e.srv.Info
	return engine.Stats{
		ClientsConnected: atomic.LoadInt64(&i.ClientsConnected),
		Subscriptions:    atomic.LoadInt64(&i.Subscriptions),
		Retained:         atomic.LoadInt64(&i.Retained),
		Inflight:         e.inflight(),
		MessagesDropped:  atomic.LoadInt64(&i.MessagesDropped),
		InflightDropped:  atomic.LoadInt64(&i.InflightDropped),
		ClientPanics:     atomic.LoadInt64(&i.ClientPanics),
	}
}

// inflight counts the QoS 1/2 messages held by every session (connected
// and offline): in flight, queued, or an inbound QoS 2 exchange. Counted
// from the sessions themselves, not from the engine's running counter,
// which a session taken over mid-acknowledgement could decrement twice
// (the gauge went below 0); a taken-over connection is no longer in
// Clients, so a session's messages count once.
func (e *Engine) inflight() int64 {
	var n int64
	e.srv.Clients.Range(func(cl *mqttcore.Client) {
		n += int64(cl.State.Inflight.Len() + cl.State.Inflight.InboundLen())
	})
	return n
}

// queuedBytes returns the bytes held for delivery by all sessions
// (connected and offline) and by the largest one.
func (e *Engine) QueuedBytes() (sum, largest int64) {
	e.srv.Clients.Range(func(cl *mqttcore.Client) {
		b := cl.QueuedBytes()
		sum += b
		largest = max(largest, b)
	})
	return sum, largest
}

func (e *Engine) Subscriptions(id string) int {
	cl, ok := e.srv.Clients.Get(id)
	if !ok || cl.Closed() {
		return 0
	}
	return cl.State.Subscriptions.Len()
}
