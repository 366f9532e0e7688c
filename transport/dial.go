package transport

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Dial connects to the URL raw ("mqtt://host:1883", "quic://host", ...).
func Dial(ctx context.Context, raw string, opts DialOptions) (Conn, error) {
	ep, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	switch ep.Scheme {
	case SchemeTCP:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", ep.Address())
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", ep, err)
		}
		return &plainConn{Conn: c, info: Info{Scheme: SchemeTCP, DialStart: start, TransportReady: time.Now()}}, nil
	}
	return nil, fmt.Errorf("dial %s: transport %q not implemented yet", ep, ep.Scheme)
}

// plainConn is a net.Conn with Info.
type plainConn struct {
	net.Conn
	info Info
}

func (c *plainConn) Info() Info                   { return c.info }
func (c *plainConn) QUICStats() (QUICStats, bool) { return QUICStats{}, false }
