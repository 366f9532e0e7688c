package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/iotq/iotq/transport/endpoint"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Listen parses raw and calls ListenEndpoint.
func Listen(raw string, opts ListenOptions) (Listener, error) {
	ep, err := endpoint.Parse(raw)
	if err != nil {
		return nil, err
	}
	return ListenEndpoint(ep, opts)
}

// ListenEndpoint starts a listener of ep's transport (tcp, tls, ws, wss,
// quic; the scheme table decides, so coap+tcp:// listens on TCP and
// coap+quic:// on QUIC with its own ALPN). Port 0 picks a free port; the
// Endpoint method returns the real one. An empty host listens on all
// interfaces. The caller must Close the Listener; conns already accepted
// stay open and belong to the caller.
func ListenEndpoint(ep Endpoint, opts ListenOptions) (Listener, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("component", "transport", "listener", ep.String())
	if ep.TLS && (opts.TLSConfig == nil || (len(opts.TLSConfig.Certificates) == 0 && opts.TLSConfig.GetCertificate == nil && opts.TLSConfig.GetConfigForClient == nil)) {
		return nil, fmt.Errorf("listen %s: %w (give a certificate and key, or let the broker generate them in its state directory)", ep, ErrTLSConfigRequired)
	}
	var (
		l   Listener
		err error
	)
	switch ep.Transport {
	case endpoint.TransportTCP, endpoint.TransportTLS:
		var nl net.Listener
		nl, err = net.Listen("tcp", ep.Address())
		if err == nil {
			var cfg *tls.Config
			if ep.Transport == endpoint.TransportTLS {
				cfg = opts.TLSConfig.Clone()
				if ep.ALPN != "" && len(cfg.NextProtos) == 0 {
					cfg.NextProtos = []string{ep.ALPN}
				}
			}
			l = newStreamListener(ep, nl, cfg, opts.QUIC.withDefaults().HandshakeIdleTimeout, log)
		}
	case endpoint.TransportWS, endpoint.TransportWSS:
		l, err = listenWS(ep, opts, log)
	case endpoint.TransportQUIC:
		if len(opts.QUIC.NextProtos) == 0 && ep.ALPN != "" {
			opts.QUIC.NextProtos = []string{ep.ALPN}
		}
		l, err = listenQUIC(ep, opts, log)
	default:
		err = fmt.Errorf("transport %s: %w", ep.Transport, ErrTransportNotBuilt)
	}
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", ep, err)
	}
	log.Debug("listening", "addr", l.Addr().String())
	return l, nil
}

// boundEndpoint returns ep with the port (and, if empty, the host) of addr.
func boundEndpoint(ep Endpoint, addr net.Addr) Endpoint {
	var ip net.IP
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip, ep.Port = a.IP, a.Port
	case *net.UDPAddr:
		ip, ep.Port = a.IP, a.Port
	}
	if ep.Host == "" && ip != nil {
		ep.Host = ip.String()
	}
	return ep
}

// acceptQueue hands accepted conns from a producer goroutine to Accept
// calls. A conn is either taken by Accept or closed when the queue closes:
// none is lost or leaked.
type acceptQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newAcceptQueue() *acceptQueue {
	return &acceptQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// put offers c to an Accept call; it closes c and returns false if the
// queue was closed first.
func (q *acceptQueue) put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		c.Close()
		return false
	}
}

// get waits for a conn, ctx or the queue's close.
func (q *acceptQueue) get(ctx context.Context) (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *acceptQueue) close() { q.once.Do(func() { close(q.done) }) }

// streamListener adapts a TCP listener to Listener, for mqtt and (with a
// TLS config) mqtts. One goroutine accepts; with TLS, one goroutine per
// connection runs the handshake (bounded by the handshake timeout), so a
// slow or broken client never delays others and Accept returns conns whose
// handshake succeeded. Close stops all of them and waits.
type streamListener struct {
	ep        Endpoint
	l         net.Listener
	tlsConf   *tls.Config // nil: plain TCP
	hsTimeout time.Duration
	log       *slog.Logger
	q         *acceptQueue
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	once sync.Once
	err  error
}

func newStreamListener(ep Endpoint, l net.Listener, tlsConf *tls.Config, hsTimeout time.Duration, log *slog.Logger) *streamListener {
	ctx, cancel := context.WithCancel(context.Background())
	s := &streamListener{
		ep: boundEndpoint(ep, l.Addr()), l: l, tlsConf: tlsConf, hsTimeout: hsTimeout,
		log: log, q: newAcceptQueue(), ctx: ctx, cancel: cancel,
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

func (s *streamListener) loop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := s.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Temporary failures (EMFILE and the like): log, keep serving.
			s.log.Warn("accept failed", "error", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-s.q.done:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if s.tlsConf != nil {
			s.wg.Add(1)
			go s.handshake(c)
			continue
		}
		if !s.q.put(c) {
			return
		}
	}
}

// handshake runs the server TLS handshake of c and queues it.
func (s *streamListener) handshake(c net.Conn) {
	defer s.wg.Done()
	tc := tls.Server(c, s.tlsConf)
	ctx, cancel := context.WithTimeout(s.ctx, s.hsTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		s.log.Debug("tls handshake failed", "remote", c.RemoteAddr().String(), "error", err)
		c.Close()
		return
	}
	s.q.put(tc)
}

// Accept returns the next TCP conn, or TLS conn with its handshake done.
func (s *streamListener) Accept(ctx context.Context) (net.Conn, error) { return s.q.get(ctx) }

func (s *streamListener) Addr() net.Addr     { return s.l.Addr() }
func (s *streamListener) Endpoint() Endpoint { return s.ep }

func (s *streamListener) Close() error {
	s.once.Do(func() {
		s.q.close()
		s.cancel()
		s.err = s.l.Close()
		s.wg.Wait()
	})
	return s.err
}
