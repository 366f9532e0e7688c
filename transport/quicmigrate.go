package transport

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/quic-go/quic-go"
)

// Connection migration (RFC 9000 section 9) on the client side
// (docs/mqtt-quic.md, "Connection migration").
//
// Migrate moves a client QUIC connection to a new local UDP socket: it
// opens the socket, probes the path to the broker from it (PATH_CHALLENGE
// and PATH_RESPONSE, which quic-go sends and checks) and switches the
// connection to it. The streams, and so the MQTT session on them, go on
// as before; the broker sees the same connection from a new address.
//
// Every socket a connection has used stays open until the connection
// closes: quic-go registers the connection on each path's transport, and
// closing one would end the connection. maxMigrations bounds them.

// maxMigrations bounds the sockets one connection may add by Migrate.
const maxMigrations = 8

// migrateProbeTimeout bounds a probe when the caller's context has no
// deadline.
const migrateProbeTimeout = 10 * time.Second

// Migrater is a connection that can move to a new local address: client
// QUIC connections returned by Dial.
type Migrater interface {
	Migrate(ctx context.Context, laddr string) error
}

// Migrate moves conn (a client QUIC connection returned by Dial, or a
// wrapper that implements Migrater) to a new UDP socket bound to laddr
// (HOST:PORT; port 0 or "" for any port, "" for any address) and returns
// once the connection sends from it. Other conns get an error saying
// that only QUIC migrates.
func Migrate(ctx context.Context, conn net.Conn, laddr string) error {
	m, ok := conn.(Migrater)
	if !ok {
		return fmt.Errorf("migrate to %s: a %T cannot migrate: only QUIC connections keep their session across an address change (reconnect instead)", laddr, conn)
	}
	return m.Migrate(ctx, laddr)
}

// Migrate implements Migrater (see Migrate). It fails, leaving the
// connection on its current path, when the connection is not a client's,
// is closed, the address cannot be bound, the server disabled migration
// or the new path does not answer the probe.
func (c *quicConn) Migrate(ctx context.Context, laddr string) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("migrate QUIC connection to %s: %w", laddr, fmt.Errorf(format, a...))
	}
	if !c.client {
		return fail("only a client can migrate (a server follows its client's new address by itself)")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, migrateProbeTimeout)
		defer cancel()
	}
	// Migrate only a connection whose handshake completed (RFC 9000
	// section 9: no migration before the handshake is confirmed).
	select {
	case <-c.hsWatch: // the handshake's facts are recorded (watchHandshake)
	case <-c.conn.Context().Done():
		return fail("connection closed: %w (reconnect)", context.Cause(c.conn.Context()))
	case <-ctx.Done():
		return fail("handshake not complete: %w", ctx.Err())
	}
	if _, ok := c.stateAfterHandshake(); !ok {
		return fail("handshake failed (reconnect)")
	}
	network := "udp6"
	if ra, ok := c.RemoteAddr().(*net.UDPAddr); ok && ra.IP.To4() != nil {
		network = "udp4"
	}
	var la *net.UDPAddr
	if laddr != "" {
		var err error
		if la, err = net.ResolveUDPAddr(network, laddr); err != nil {
			return fail("%w (give HOST:PORT of this host, in the broker's address family %s)", err, network)
		}
	}
	c.migMu.Lock() // one move at a time
	defer c.migMu.Unlock()
	c.mu.Lock()
	closed, n := c.closed, len(c.migrated)
	c.mu.Unlock()
	if closed {
		return fail("%w", net.ErrClosed)
	}
	if n >= maxMigrations {
		return fail("this connection has migrated %d times, the limit (each path keeps a socket open): reconnect instead", n)
	}
	udp, err := net.ListenUDP(network, la)
	if err != nil {
		return fail("%w (pick an address assigned to this host and a free port, or port 0)", err)
	}
	tr := &quic.Transport{Conn: udp}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = udp.Close()
		return fail("%w", net.ErrClosed)
	}
	// From here the socket belongs to the connection: quic-go registers
	// the connection on tr when it probes, and closing tr would end it.
	c.migrated = append(c.migrated, func() {
		_ = tr.Close()
		_ = udp.Close() // a Transport closes only sockets it opened itself
	})
	c.mu.Unlock()

	path, err := c.conn.AddPath(tr)
	if err != nil {
		return fail("%w (reconnect instead)", err)
	}
	// Probe waits for an answer or ctx, not for the connection: end it
	// when the connection ends.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	stop := context.AfterFunc(c.conn.Context(), pcancel)
	defer stop()
	if err := path.Probe(pctx); err != nil {
		_ = path.Close()
		if c.conn.Context().Err() != nil {
			return fail("connection closed while probing: %w (reconnect)", context.Cause(c.conn.Context()))
		}
		return fail("probe the new path from %s: %w (the broker did not answer from there: check the route, or stay on the old path)", udp.LocalAddr(), err)
	}
	if err := path.Switch(); err != nil {
		_ = path.Close()
		return fail("switch to the new path: %w", err)
	}
	c.mu.Lock()
	c.laddr = udp.LocalAddr()
	c.mu.Unlock()
	return nil
}

// closeMigrated closes the sockets Migrate added, once the connection
// has closed.
func (c *quicConn) closeMigrated() {
	c.mu.Lock()
	fs := c.migrated
	c.migrated = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
