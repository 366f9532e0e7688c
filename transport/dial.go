package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/iotq/iotq/transport/endpoint"
)

// Dial parses raw ("mqtt://host:1883", "quic://host", ...) and calls
// DialEndpoint. Callers that already hold an Endpoint call DialEndpoint.
func Dial(ctx context.Context, raw string, opts DialOptions) (Conn, error) {
	ep, err := endpoint.Parse(raw)
	if err != nil {
		return nil, err
	}
	return DialEndpoint(ctx, ep, opts)
}

// DialEndpoint opens a connection of ep's transport (tcp, tls, ws, wss,
// quic) to ep's address. ctx bounds connection establishment only;
// cancelling it later does not affect the returned Conn. The caller must
// Close the Conn. Every error is a *DialError: errors.Is tells its kind
// (ErrRefused, ErrTimeout, ErrCertificate, ...) and its message carries one
// hint.
func DialEndpoint(ctx context.Context, ep Endpoint, opts DialOptions) (Conn, error) {
	if ep.Host == "" {
		return nil, &DialError{Endpoint: ep, Kind: ErrNoHost, Err: ErrNoHost}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	var (
		c   Conn
		err error
	)
	switch ep.Transport {
	case endpoint.TransportTCP:
		c, err = dialTCP(ctx, ep, start)
	case endpoint.TransportTLS:
		c, err = dialTLS(ctx, ep, opts, start)
	case endpoint.TransportWS, endpoint.TransportWSS:
		c, err = dialWS(ctx, ep, opts, start)
	case endpoint.TransportQUIC:
		c, err = dialQUIC(ctx, ep, opts, start)
	default:
		err = fmt.Errorf("transport %s: %w", ep.Transport, ErrTransportNotBuilt)
	}
	if err != nil {
		return nil, newDialError(ep, err)
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
	if qc, ok := c.(*quicConn); ok && ep.Protocol == endpoint.ProtocolMQTT && opts.QUIC.ClientStreams.enabled() {
		c = newClientMux(qc, opts.QUIC.ClientStreams)
	}
	return c, nil
}

func dialTCP(ctx context.Context, ep Endpoint, start time.Time) (Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ep.Address())
	if err != nil {
		return nil, err
	}
	return &plainConn{Conn: c, info: Info{Scheme: ep.Scheme, DialStart: start, TransportReady: time.Now()}}, nil
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
	cfg, err := ClientTLSConfig(ep, opts)
	if err != nil {
		raw.Close()
		return nil, err
	}
	tc, err := tlsHandshake(ctx, raw, cfg)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	st := tc.ConnectionState()
	return &plainConn{Conn: tc, info: Info{
		Scheme:          ep.Scheme,
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
