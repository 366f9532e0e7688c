package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

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

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	started  bool
	closed   bool
	conns    map[*proxyConn]struct{}
	httpSrv  *http.Server
	httpAddr net.Addr

	wg        sync.WaitGroup // accept loops, connections, http server
	closeOnce sync.Once
	closeErr  error
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
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{opts: o, log: log, met: newMetrics(), track: newTracker(o), ctx: ctx, cancel: cancel, conns: map[*proxyConn]struct{}{}}
	if err := g.setupTLS(); err != nil {
		cancel()
		return nil, err
	}
	labels := map[string]bool{}
	for i, r := range o.Routes {
		rt, err := newRoute(g, i, r, labels)
		if err != nil {
			cancel()
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
	return nil
}

// CAFile is the CA certificate clients should trust when the gateway
// generated its own certificate ("" otherwise).
func (g *Gateway) CAFile() string { return g.caFile }

// Start opens every route's QUIC listener and the metrics server, then
// returns; the gateway serves until Close or until ctx ends. If one
// listener fails, those already open are closed and the error returned.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	if g.started {
		return ErrStarted
	}
	g.started = true
	if err := g.start(ctx); err != nil {
		for _, rt := range g.routes {
			if rt.ln != nil {
				_ = rt.ln.Close()
			}
		}
		return err
	}
	return nil
}

func (g *Gateway) start(ctx context.Context) error {
	for _, rt := range g.routes {
		if err := rt.listen(); err != nil {
			return err
		}
	}
	if g.opts.Metrics != "" {
		if err := g.startHTTP(); err != nil {
			return err
		}
	}
	for _, rt := range g.routes {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.acceptLoop(rt)
		}()
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		select {
		case <-ctx.Done():
			go g.Close() // Close waits for this goroutine: do not block it.
		case <-g.ctx.Done():
		}
	}()
	if g.opts.ReadyFile != "" {
		// Same contract as the broker's ready file (package records), so
		// the lab reads both alike.
		r := records.BrokerReady{Listeners: g.Endpoints(), CAFile: g.caFile, PID: os.Getpid()}
		if err := records.WriteBrokerReady(g.opts.ReadyFile, r); err != nil {
			return fmt.Errorf("gateway: ready file: %w", err)
		}
	}
	attrs := []any{}
	for _, rt := range g.routes {
		attrs = append(attrs, slog.Group("route", "listen", rt.ln.Endpoint().String(), "upstreams", rt.r.Upstreams, "alpn", rt.r.ALPN, "early_data", rt.r.EarlyData))
	}
	if g.caFile != "" {
		attrs = append(attrs, "ca_file", g.caFile)
	}
	if g.httpAddr != nil {
		attrs = append(attrs, "metrics", "http://"+g.httpAddr.String()+"/metrics")
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

func (g *Gateway) startHTTP() error {
	l, err := net.Listen("tcp", g.opts.Metrics)
	if err != nil {
		return fmt.Errorf("gateway: metrics listener %s: %w", g.opts.Metrics, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", g.met.handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if g.ctx.Err() != nil {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	g.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	g.httpAddr = l.Addr()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := g.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Error("metrics server failed", "err", err)
		}
	}()
	return nil
}

func (g *Gateway) acceptLoop(rt *route) {
	backoff := 5 * time.Millisecond
	for {
		c, err := rt.ln.Accept(g.ctx)
		if err != nil {
			if g.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			rt.log.Warn("accept failed", "err", err)
			select {
			case <-g.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		qc, ok := c.(transport.QUICConn)
		if !ok { // cannot happen with a quic:// listener
			_ = c.Close()
			continue
		}
		q := g.track.lookup(qc.Context())
		if q != nil && q.refused != "" {
			// Past a cap; its stream arrived before the handshake
			// completed (0-RTT).
			_ = qc.CloseWithError(CodeConnectionLimit, q.refused)
			continue
		}
		if rt.r.EarlyData == EarlyHold {
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
			continue
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			_ = qc.CloseWithError(CodeShutdown, "gateway shutting down")
			return
		}
		g.conns[pc] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			pc.serve()
			g.mu.Lock()
			delete(g.conns, pc)
			g.mu.Unlock()
		}()
	}
}

// Close stops accepting, aborts the connections being forwarded (QUIC
// error CodeShutdown, upstream closed), stops the metrics server and waits
// for every goroutine. Idempotent.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		started := g.started
		g.mu.Unlock()
		g.cancel()
		var errs []error
		for _, rt := range g.routes {
			if rt.ln != nil {
				if err := rt.ln.Close(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		g.mu.Lock()
		conns := make([]*proxyConn, 0, len(g.conns))
		for pc := range g.conns {
			conns = append(conns, pc)
		}
		srv := g.httpSrv
		g.mu.Unlock()
		for _, pc := range conns {
			pc.abort(CodeShutdown, "gateway shutting down", reasonShutdown)
		}
		if srv != nil {
			ctx, c := context.WithTimeout(context.Background(), time.Second)
			_ = srv.Shutdown(ctx)
			c()
		}
		g.wg.Wait()
		if started { // not after --check, which only builds it
			g.log.Info("gateway stopped")
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}
