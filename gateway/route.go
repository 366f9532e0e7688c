package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// route is one Route at run time.
type route struct {
	g     *Gateway
	r     Route // with defaults
	label string
	ups   []upstream
	upTLS *tls.Config // base for tls:// upstreams; nil if none
	tls   *tls.Config // QUIC server config with the replay policy hook
	log   *slog.Logger
	next  atomic.Uint64
	ln    transport.Listener
	// proxyHint rate-limits the info line about an upstream that closes
	// right after the PROXY header.
	proxyHint hintLimiter
}

func newRoute(g *Gateway, i int, r Route, labels map[string]bool) (*route, error) {
	rt := &route{g: g, r: r, label: r.Listen, proxyHint: hintLimiter{every: time.Minute}}
	if labels[rt.label] {
		rt.label = fmt.Sprintf("%s#%d", r.Listen, i)
	}
	labels[rt.label] = true
	rt.log = g.log.With("route", rt.label)
	anyTLS := false
	for _, raw := range r.Upstreams {
		u, err := parseUpstream(raw)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		rt.ups = append(rt.ups, u)
		anyTLS = anyTLS || u.tls
	}
	if anyTLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.UpstreamTLS.ServerName, InsecureSkipVerify: r.UpstreamTLS.Insecure} //nolint:gosec // Insecure is an explicit test option
		if r.UpstreamTLS.CAFile != "" {
			pool, err := certs.CertPool(r.UpstreamTLS.CAFile)
			if err != nil {
				return nil, fmt.Errorf("gateway: route %s: upstream CA: %w", rt.label, err)
			}
			cfg.RootCAs = pool
		}
		rt.upTLS = cfg
	}
	g.met.initRoute(rt.label, r.Upstreams)
	refused := g.met.early.WithLabelValues(rt.label, earlyRefused)
	base := g.tlsConf
	cfg := base.Clone()
	// The replay policy: a resumed connection whose ticket allows early
	// data keeps that permission only if the route accepts 0-RTT for the
	// negotiated ALPN. Refusing here makes the client re-send its early
	// data after the handshake (it cannot be replayed then).
	cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		g.tickets.refresh()
		ss, err := base.DecryptTicket(identity, cs)
		if err != nil || ss == nil || !ss.EarlyData {
			return ss, err
		}
		if !rt.earlyAllowed(cs.NegotiatedProtocol) {
			ss.EarlyData = false
			refused.Inc()
		}
		return ss, nil
	}
	// Tickets are encrypted with the base's keys too (not with the copy a
	// connection's configuration took), so a reloaded ticket key file
	// applies to every route at once.
	cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		g.tickets.refresh()
		return base.EncryptTicket(cs, ss)
	}
	rt.tls = cfg
	return rt, nil
}

// earlyAllowed applies the route's replay policy to a negotiated ALPN.
func (rt *route) earlyAllowed(alpn string) bool {
	switch rt.r.EarlyData {
	case records.EarlyAccept:
		return true
	case records.EarlyALPN:
		return slices.Contains(rt.r.EarlyDataALPN, alpn)
	case records.EarlyHold: // the protocols whose first message we can find
		return alpn == transport.ALPN || alpn == endpoint.ALPNAMQP
	}
	return false
}

func (rt *route) listen() error {
	o := rt.g.opts
	qo := transport.QUICOptions{
		HandshakeIdleTimeout: o.HandshakeTimeout,
		MaxIdleTimeout:       o.IdleTimeout,
		Refuse0RTT:           rt.r.EarlyData == records.EarlyRefuse,
		NextProtos:           rt.r.ALPN,
		AcceptConn:           rt.acceptConn,
	}
	if o.Retry != RetryNever {
		qo.VerifySourceAddress = rt.verifySource
	}
	l, err := transport.Listen(rt.r.Listen, transport.ListenOptions{
		TLSConfig: rt.tls,
		QUIC:      qo,
		Logger:    rt.log,
	})
	if err != nil {
		return fmt.Errorf("gateway: route %s: %w", rt.label, err)
	}
	rt.ln = l
	return nil
}

// first returns the index of the upstream to try first for a client.
func (rt *route) first(client net.Addr) int {
	n := len(rt.ups)
	if n == 1 {
		return 0
	}
	if rt.r.Balance == BalanceClientHash {
		h := fnv.New32a()
		if ap, ok := addrPort(client); ok {
			b := ap.Addr().As16()
			h.Write(b[:])
		} else {
			h.Write([]byte(client.String()))
		}
		return int(h.Sum32() % uint32(n))
	}
	return int((rt.next.Add(1) - 1) % uint64(n))
}

// upConn is an upstream connection; raw is the TCP conn under a TLS one.
type upConn struct {
	net.Conn
	raw *net.TCPConn
}

// CloseWrite sends TLS close_notify (for TLS) and the TCP FIN.
func (u *upConn) CloseWrite() error {
	if tc, ok := u.Conn.(*tls.Conn); ok {
		_ = tc.CloseWrite()
	}
	return u.raw.CloseWrite()
}

// dial connects to an upstream, trying each in turn from the balancer's
// choice. Every failed attempt is counted.
func (rt *route) dial(ctx context.Context, client, local net.Addr) (*upConn, error) {
	start := rt.first(client)
	var lastErr error
	for i := range rt.ups {
		u := rt.ups[(start+i)%len(rt.ups)]
		c, err := rt.dialOne(ctx, u, client, local)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		rt.g.met.upFailures.WithLabelValues(rt.label, u.raw).Inc()
		rt.log.Warn("upstream failed", "upstream", u.raw, "client", client.String(), "error", err)
		lastErr = err
	}
	return nil, fmt.Errorf("%w: %w", ErrNoUpstream, lastErr)
}

func (rt *route) dialOne(ctx context.Context, u upstream, client, local net.Addr) (*upConn, error) {
	ctx, cancel := context.WithTimeout(ctx, rt.g.opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", u.raw, err)
	}
	tc := c.(*net.TCPConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if rt.r.ProxyProtocol {
		if _, err := c.Write(proxyV2Header(client, local)); err != nil {
			c.Close()
			return nil, fmt.Errorf("upstream %s: write PROXY header: %w", u.raw, err)
		}
	}
	if u.tls {
		cfg := rt.upTLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.host
		}
		tlc := tls.Client(c, cfg)
		if err := tlc.HandshakeContext(ctx); err != nil {
			c.Close()
			if rt.r.ProxyProtocol {
				return nil, fmt.Errorf("upstream %s: tls handshake after the PROXY header (does the upstream read PROXY protocol v2? proxy_protocol is on): %w", u.raw, err)
			}
			return nil, fmt.Errorf("upstream %s: tls handshake: %w", u.raw, err)
		}
		c = tlc
	}
	_ = c.SetDeadline(time.Time{})
	return &upConn{Conn: c, raw: tc}, nil
}
