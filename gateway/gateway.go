package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// Gateway forwards QUIC connections to TCP upstreams. Safe for concurrent
// use.
type Gateway struct {
	opts Options // with defaults
	log  *slog.Logger
	met  *metrics
	// track counts QUIC connections for the caps and Retry.
	track *tracker

	tlsConf *tls.Config
	caFile  string
	routes  []*route
	// tickets rereads tls.ticket_keys_file (nil without one).
	tickets *ticketReloader

	// life is the skeleton shared with the broker: Start, Ready, Close,
	// the goroutines Close waits for (accept loops, connections, watchers)
	// and the metrics server.
	life *serve.Lifecycle
	ctx  context.Context // life.Context(): cancelled by Close

	mu       sync.Mutex
	closed   bool // no connection is added to conns once set
	conns    map[*proxyConn]struct{}
	httpAddr net.Addr
}

// New validates opts and prepares TLS (loading or generating the
// certificate and the persistent ticket keys). It opens no sockets.
func New(opts Options) (*Gateway, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: invalid options:\n%w", err)
	}
	o := opts.WithDefaults()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	life := serve.NewLifecycle(serve.Errors{Started: ErrStarted, Closed: ErrClosed, NotStarted: ErrNotStarted})
	g := &Gateway{opts: o, log: log, met: newMetrics(), track: newTracker(o), life: life, ctx: life.Context(), conns: map[*proxyConn]struct{}{}}
	if err := g.setupTLS(); err != nil {
		_ = life.Close(nil, nil)
		return nil, err
	}
	labels := map[string]bool{}
	for i, r := range o.Routes {
		rt, err := newRoute(g, i, r, labels)
		if err != nil {
			_ = life.Close(nil, nil)
			return nil, err
		}
		g.routes = append(g.routes, rt)
	}
	return g, nil
}

func (g *Gateway) setupTLS() error {
	listen := make([]string, 0, len(g.opts.Routes))
	for _, r := range g.opts.Routes {
		listen = append(listen, r.Listen)
	}
	cfg, ca, err := g.opts.TLS.Server(g.opts.StateDir, transport.ListenHosts(listen))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.tlsConf, g.caFile = cfg, ca
	if f := g.opts.TLS.TicketKeysFile; f != "" {
		g.tickets = newTicketReloader(f, cfg, g.log)
	}
	return nil
}

// CAFile is the CA certificate clients should trust when the gateway
// generated its own certificate ("" otherwise).
func (g *Gateway) CAFile() string { return g.caFile }

// Start opens every route's QUIC listener and the metrics server, then
// returns; the gateway serves until Close or until ctx ends. If one
// listener fails, those already open are closed and the error returned.
func (g *Gateway) Start(ctx context.Context) error {
	return g.life.Start(ctx, g.start, g.closeOpened, func() { _ = g.Close() })
}

// closeOpened closes the listeners a failed start opened.
func (g *Gateway) closeOpened() {
	for _, rt := range g.routes {
		if rt.ln != nil {
			_ = rt.ln.Close()
		}
	}
}

func (g *Gateway) start() error {
	for _, rt := range g.routes {
		if err := rt.listen(); err != nil {
			return err
		}
	}
	if g.opts.Metrics != "" {
		a, err := g.life.StartAdmin(serve.AdminOptions{Addr: g.opts.Metrics, Metrics: g.met.handler(), Logger: g.log})
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		g.mu.Lock()
		g.httpAddr = a.Addr()
		g.mu.Unlock()
	}
	for _, rt := range g.routes {
		g.life.Serve(rt.ln, rt.log, func(c net.Conn) bool { return g.accepted(rt, c) })
	}
	if g.opts.ReadyFile != "" {
		// The broker's ready file contract (package records), so the lab
		// reads both alike.
		if err := records.WriteServerReady(g.opts.ReadyFile, g.Endpoints(), g.caFile); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	attrs := []any{}
	for _, rt := range g.routes {
		attrs = append(attrs, slog.Group("route", "listen", rt.ln.Endpoint().String(), "upstreams", rt.r.Upstreams, "alpn", rt.r.ALPN, "early_data", rt.r.EarlyData))
	}
	if g.caFile != "" {
		attrs = append(attrs, "ca_file", g.caFile)
	}
	if a := g.MetricsAddr(); a != nil {
		attrs = append(attrs, "metrics", "http://"+a.String()+"/metrics")
	}
	g.log.Info("gateway ready", attrs...)
	return nil
}

// Endpoints returns the QUIC URL of every route, with the real ports,
// once started.
func (g *Gateway) Endpoints() []string {
	var out []string
	for _, rt := range g.routes {
		if rt.ln != nil {
			out = append(out, rt.ln.Endpoint().String())
		}
	}
	return out
}

// MetricsAddr is the address of the metrics server (nil if off).
func (g *Gateway) MetricsAddr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.httpAddr
}

// Ready waits until Start has opened every route (nil) or failed (its
// error), or ctx ends.
func (g *Gateway) Ready(ctx context.Context) error { return g.life.Ready(ctx) }

// accepted takes over one connection of rt's accept loop
// (serve.AcceptLoop): the caps, the 0-RTT hold, then a goroutine forwards
// it. false stops the loop (the gateway is closing).
func (g *Gateway) accepted(rt *route, c net.Conn) bool {
	qc, ok := c.(transport.QUICConn)
	if !ok { // cannot happen with a quic:// listener
		_ = c.Close()
		return true
	}
	q := g.track.lookup(qc.Context())
	if q != nil && q.refused != "" {
		// Past a cap; its stream arrived before the handshake
		// completed (0-RTT).
		_ = qc.CloseWithError(CodeConnectionLimit, q.refused)
		return true
	}
	if rt.r.EarlyData == records.EarlyHold {
		switch qc.Info().NegotiatedProto {
		case transport.ALPN:
			qc = transport.HoldAfterFirst(qc, transport.MQTTFirstPacket, nil)
		case endpoint.ALPNAMQP:
			qc = transport.HoldAfterFirst(qc, amqpBeforeTransfer, nil)
		}
	}
	pc := &proxyConn{g: g, rt: rt, qc: qc, q: q}
	if q != nil && !q.attach(pc) { // the first-data timeout closed it
		_ = qc.CloseWithError(CodeFirstDataTimeout, "no data in time (first_data_timeout)")
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = qc.CloseWithError(CodeShutdown, "gateway shutting down")
		return false
	}
	g.conns[pc] = struct{}{}
	g.life.Go(func() {
		pc.serve()
		g.mu.Lock()
		delete(g.conns, pc)
		g.mu.Unlock()
	})
	return true
}

// Close stops accepting, aborts the connections being forwarded (QUIC
// error CodeShutdown, upstream closed), stops the metrics server and waits
// for every goroutine. Idempotent and safe on a nil Gateway.
func (g *Gateway) Close() error {
	if g == nil {
		return nil
	}
	return g.life.Close(g.stop, g.finish)
}

// stop is the first half of Close: close the listeners, then abort every
// connection being forwarded.
func (g *Gateway) stop() error {
	var errs []error
	for _, rt := range g.routes {
		if rt.ln != nil {
			if err := rt.ln.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	g.mu.Lock()
	g.closed = true
	conns := make([]*proxyConn, 0, len(g.conns))
	for pc := range g.conns {
		conns = append(conns, pc)
	}
	g.mu.Unlock()
	for _, pc := range conns {
		pc.abort(CodeShutdown, "gateway shutting down", reasonShutdown)
	}
	return errors.Join(errs...)
}

// finish ends Close once every goroutine has ended. A gateway that never
// served has nothing to say (`iotq gateway --check`).
func (g *Gateway) finish() error {
	if g.life.Served() {
		g.log.Info("gateway stopped")
	}
	return nil
}
