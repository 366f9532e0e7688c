package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/broker/mochi"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// Server is an MQTT broker serving every configured listener. It is safe for
// concurrent use.
type Server struct {
	opts Options // with defaults
	log  *slog.Logger
	eng  engine.Engine
	met  *metrics

	tlsConf *tls.Config
	caFile  string
	auth    engine.Authorizer // nil: everyone may read and write (for the CoAP front)
	coap    coapState         // the CoAP front (coap.go)

	// life is the skeleton shared with the gateway: Start, Ready, Close,
	// the serving context, the goroutines Close waits for (accept loops,
	// connections, memory reclaim) and the metrics server.
	life *serve.Lifecycle

	mu        sync.Mutex // guards what Start sets
	listeners []transport.Listener
	endpoints []string
	httpAddr  net.Addr
}

// New validates opts, loads credential files and prepares the engine and the
// TLS material. It opens no sockets; Start does.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("broker: invalid options:\n%w", err)
	}
	o := opts.WithDefaults()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: o, log: log, life: serve.NewLifecycle(serve.Errors{Started: ErrStarted, Closed: ErrClosed, NotStarted: ErrNotStarted})}
	s.met = newMetrics()

	var auth engine.Authorizer
	if o.Auth.PasswordFile != "" || o.Auth.ACLFile != "" || !*o.Auth.AllowAnonymous {
		a, err := loadAuth(o.Auth)
		if err != nil {
			return nil, err
		}
		auth = a
		s.auth = a
	}

	if o.needsTLS() {
		if err := s.setupTLS(); err != nil {
			return nil, err
		}
	}

	storePath, inflightPath := "", ""
	if o.StateDir != "" && o.Store == StoreBolt {
		if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
			return nil, fmt.Errorf("broker: create state directory %s: %w", o.StateDir, err)
		}
		storePath = filepath.Join(o.StateDir, "store.db")
		inflightPath = filepath.Join(o.StateDir, "inflight.log")
	}
	eng, err := mochi.New(engine.Config{
		Logger:       log,
		Auth:         auth,
		Obs:          s.met,
		StorePath:    storePath,
		InflightPath: inflightPath,
		Fsync:        o.Fsync,
		Flow:         o.Flow,
		Limits:       o.Limits,
	})
	if err != nil {
		return nil, err
	}
	s.eng = eng
	s.met.setEngine(eng)
	return s, nil
}

func (s *Server) setupTLS() error {
	o := s.opts
	dir := o.StateDir
	if dir == "" && o.TLS.Cert == "" {
		dir = serve.DefaultStateDir()
		s.log.Info("no --state-dir given: keeping the generated TLS certificate in the default state directory", "dir", dir)
	}
	cfg, ca, err := o.TLS.Server(dir, transport.ListenHosts(o.Listen))
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	s.tlsConf, s.caFile = cfg, ca
	if ca != "" {
		s.log.Info("TLS: using the generated certificate; clients must trust the CA", "ca_file", ca)
	}
	return nil
}

// CAFile is the CA certificate clients should trust when the broker
// generated its own certificate ("" otherwise).
func (s *Server) CAFile() string { return s.caFile }

// Start opens every listener and starts serving. It does not block. If one
// listener fails, the ones already opened are closed and the error is
// returned. ctx bounds the lifetime of the server: when it is cancelled the
// server closes itself (as Close does).
func (s *Server) Start(ctx context.Context) error {
	return s.life.Start(ctx, s.start, s.closeOpened, func() { _ = s.Close() })
}

// closeOpened closes the listeners a failed start opened.
func (s *Server) closeOpened() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		_ = l.Close()
	}
	s.listeners = nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.eng.Start(); err != nil {
		return err
	}
	streams := s.quicStreams()
	lopts := transport.ListenOptions{
		TLSConfig: s.tlsConf,
		QUIC: transport.QUICOptions{
			HandshakeIdleTimeout: s.opts.QUIC.HandshakeTimeout,
			MaxIdleTimeout:       s.opts.QUIC.IdleTimeout,
			Refuse0RTT:           s.opts.QUIC.EarlyData == records.EarlyRefuse,
			NextProtos:           quicALPNs(streams),
			Streams:              streams,
		},
		Logger: s.log.With("component", "transport"),
	}
	for _, raw := range s.opts.Listen {
		l, err := s.listen(raw, lopts) // CoAP schemes: coap.go
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%w: %s is taken by another process (find it with: ss -ltnup | grep %s); choose another port with --listen", ErrAddressInUse, raw, portOf(raw))
			}
			return fmt.Errorf("broker: %w", err)
		}
		s.listeners = append(s.listeners, l)
		s.endpoints = append(s.endpoints, l.Endpoint().String())
	}
	if s.opts.Metrics != "" {
		a, err := s.life.StartAdmin(serve.AdminOptions{Addr: s.opts.Metrics, Metrics: s.met.handler(), Pprof: s.opts.Pprof, Logger: s.log})
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		s.httpAddr = a.Addr()
	}
	for _, l := range s.listeners {
		log := s.log.With("listener", l.Endpoint().String())
		s.life.Serve(l, log, s.accepted(l, log))
	}
	// Return memory to the OS after bursts (reclaim.go).
	s.life.Go(func() { reclaimMemory(s.life.Context(), reclaimInterval, reclaimMinBytes, debug.FreeOSMemory) })
	if s.opts.ReadyFile != "" {
		if err := records.WriteServerReady(s.opts.ReadyFile, s.endpoints, s.caFile); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	attrs := []any{"listeners", s.endpoints}
	if s.caFile != "" {
		attrs = append(attrs, "ca_file", s.caFile)
	}
	if s.httpAddr != nil {
		attrs = append(attrs, "metrics", "http://"+s.httpAddr.String()+"/metrics")
	}
	if len(s.opts.Listen) == 1 && s.opts.Listen[0] == DefaultListen {
		s.log.Info("no listener configured: listening on loopback only; use --listen to accept remote clients", "listen", DefaultListen)
	}
	s.log.Info("broker ready", attrs...)
	return nil
}

// accepted returns what the accept loop of l (serve.AcceptLoop) does with
// each connection: the 0-RTT hold, metering, then the engine serves it on
// a goroutine of its own.
func (s *Server) accepted(l transport.Listener, log *slog.Logger) func(net.Conn) bool {
	id := l.Endpoint().String()
	scheme := string(l.Endpoint().Scheme)
	ctx := s.life.Context()
	return func(c net.Conn) bool {
		if qc, ok := c.(transport.QUICConn); ok && s.opts.QUIC.EarlyData == records.EarlyHold {
			c = transport.HoldAfterFirst(qc, transport.MQTTFirstPacket, s.met.earlyDropped.Inc)
		}
		mc := s.met.wrapConn(c, scheme)
		s.life.Add()
		go s.eng.ServeConn(id, mc, func(err error) { s.connEnded(ctx, log, mc, err) })
		return true
	}
}

// connEnded runs once when the session of mc has ended. The goroutine
// serving a connection may spend an idle client's life waiting for the
// next packet (TLS, WebSocket, QUIC; a plain TCP client gives its
// goroutine up instead), so its frames stay small (the logging is in a
// function of its own): with less than about 1.2 KiB of stack in use the
// runtime can shrink the goroutine's stack to 4 KiB.
func (s *Server) connEnded(ctx context.Context, log *slog.Logger, mc *meteredConn, err error) {
	defer s.life.Done()
	_ = mc.Close()
	if err != nil {
		logConnEnd(ctx, log, mc, err)
	}
}

//go:noinline
func logConnEnd(ctx context.Context, log *slog.Logger, mc *meteredConn, err error) {
	if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("connection ended", "remote", mc.RemoteAddr(), "error", err)
	}
}

// MetricsAddr is the bound address of the metrics server (nil if off or not
// started).
func (s *Server) MetricsAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.httpAddr
}

// Ready waits until Start has opened every listener (nil) or failed (its
// error), or ctx ends.
func (s *Server) Ready(ctx context.Context) error { return s.life.Ready(ctx) }

// Endpoints returns the URLs actually served, with real ports, in the order
// of Options.Listen. Empty before Start.
func (s *Server) Endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.endpoints...)
}

// Addrs returns the bound addresses of the listeners, in the order of
// Options.Listen.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]net.Addr, 0, len(s.listeners))
	for _, l := range s.listeners {
		out = append(out, l.Addr())
	}
	return out
}

// Subscriptions returns the number of subscriptions of the connected client
// with this client identifier (0 if it is not connected). Tests use it to
// wait until an external subscriber is ready.
func (s *Server) Subscriptions(clientID string) int { return s.eng.Subscriptions(clientID) }

// Options returns the effective options (defaults filled in).
func (s *Server) Options() Options { return s.opts }

// Close stops accepting, tells every client that the server shuts down,
// waits for them (at most ShutdownTimeout), then flushes and closes the
// store. It is idempotent and safe on a nil Server.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	return s.life.Close(s.stop, s.finish)
}

// stop is the first half of Close: stop accepting, then tell every client
// that the server shuts down and wait for them (at most ShutdownTimeout).
func (s *Server) stop() error {
	s.mu.Lock()
	listeners := s.listeners
	s.mu.Unlock()
	var errs []error
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("broker: close listener %s: %w", l.Endpoint(), err))
		}
	}
	if s.life.Started() {
		s.eng.DisconnectAll()
		ctx, cancelWait := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
		if err := s.eng.WaitClients(ctx); err != nil {
			s.log.Warn("clients did not leave in time; closed them", "timeout", s.opts.ShutdownTimeout)
		}
		cancelWait()
	}
	return errors.Join(errs...)
}

// finish is the second half of Close, once every goroutine has ended:
// flush and close the store (opened by New, so also without Start).
func (s *Server) finish() error {
	err := s.eng.Close()
	if s.life.Served() {
		s.log.Info("broker stopped")
	}
	return err
}

// portOf returns the port of a listen URL for the hint of ErrAddressInUse
// ("mqtt://127.0.0.1:1883" -> ":1883"), or the URL itself.
func portOf(raw string) string {
	if i := strings.LastIndexByte(raw, ':'); i >= 0 && i+1 < len(raw) {
		p := raw[i+1:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[:j]
		}
		return ":" + p
	}
	return raw
}
