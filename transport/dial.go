package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Dial connects to the URL raw ("mqtt://host:1883", "quic://host", ...).
// ctx bounds connection establishment only; cancelling it later does not
// affect the returned Conn. The caller must Close the Conn.
func Dial(ctx context.Context, raw string, opts DialOptions) (Conn, error) {
	ep, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if ep.Host == "" {
		return nil, fmt.Errorf("dial %s: %w (write scheme://HOST:PORT)", raw, ErrNoHost)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	var c Conn
	switch ep.Scheme {
	case SchemeTCP:
		c, err = dialTCP(ctx, ep, start)
	case SchemeTLS:
		c, err = dialTLS(ctx, ep, opts, start)
	case SchemeWS, SchemeWSS:
		c, err = dialWS(ctx, ep, opts, start)
	case SchemeQUIC:
		c, err = dialQUIC(ctx, ep, opts, start)
	default:
		err = fmt.Errorf("transport %q not supported", ep.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", ep, err)
	}
	// A cache that writes behind (FileSessionCache) is flushed when the
	// conn closes, so a process that closes its conn before exiting keeps
	// the ticket it received.
	if f, ok := opts.SessionCache.(interface{ Flush() }); ok {
		switch cc := c.(type) {
		case *plainConn:
			cc.flush = f.Flush
		case *wsConn:
			cc.flush = f.Flush
		case *quicConn:
			cc.flush = f.Flush
		}
	}
	return c, nil
}

func dialTCP(ctx context.Context, ep Endpoint, start time.Time) (Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ep.Address())
	if err != nil {
		return nil, err
	}
	return &plainConn{Conn: c, info: Info{Scheme: SchemeTCP, DialStart: start, TransportReady: time.Now()}}, nil
}

// clientTLSConfig clones cfg (nil: system roots), defaults ServerName to the
// URL host and installs the session cache keyed by scheme and address.
func clientTLSConfig(ep Endpoint, opts DialOptions) *tls.Config {
	var cfg *tls.Config
	if opts.TLSConfig != nil {
		cfg = opts.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = ep.Host
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if opts.SessionCache != nil {
		cfg.ClientSessionCache = prefixedCache{prefix: string(ep.Scheme) + "://" + ep.Address() + " ", c: opts.SessionCache}
	} else if cfg.ClientSessionCache != nil {
		cfg.ClientSessionCache = prefixedCache{prefix: string(ep.Scheme) + "://" + ep.Address() + " ", c: cfg.ClientSessionCache}
	}
	return cfg
}

// tlsHandshake runs a client TLS handshake over c.
func tlsHandshake(ctx context.Context, c net.Conn, cfg *tls.Config) (*tls.Conn, error) {
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tc, nil
}

func dialTLS(ctx context.Context, ep Endpoint, opts DialOptions, start time.Time) (Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", ep.Address())
	if err != nil {
		return nil, err
	}
	tc, err := tlsHandshake(ctx, raw, clientTLSConfig(ep, opts))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	st := tc.ConnectionState()
	return &plainConn{Conn: tc, info: Info{
		Scheme:          SchemeTLS,
		DialStart:       start,
		TransportReady:  now,
		HandshakeDone:   now,
		TLSResumed:      st.DidResume,
		NegotiatedProto: st.NegotiatedProtocol,
	}}, nil
}

// plainConn is a net.Conn with Info (mqtt, mqtts). Close is idempotent.
type plainConn struct {
	net.Conn
	info  Info
	flush func() // session cache flush, may be nil

	closeOnce sync.Once
	closeErr  error
}

func (c *plainConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Conn.Close()
		if c.flush != nil {
			c.flush()
		}
	})
	return c.closeErr
}

func (c *plainConn) Info() Info                   { return c.info }
func (c *plainConn) QUICStats() (QUICStats, bool) { return QUICStats{}, false }
