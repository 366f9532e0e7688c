package mqtt

import (
	"context"
	"fmt"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/transport"
)

// Migrate moves c, an MQTT client over QUIC returned by Dial, to a new
// local UDP address (HOST:PORT; port 0 for any port) without
// reconnecting: the QUIC connection probes the path to the broker from
// the new socket and switches to it, and the MQTT session, its
// subscriptions and its messages in flight go on (transport.Migrate). Use
// it when the device's address changes (wifi to cellular). A NAT that
// rebinds the client's port needs no call: the broker follows the new
// address by itself. Over TCP and WebSocket there is nothing to migrate:
// the error says to reconnect.
func Migrate(ctx context.Context, c core.Client, laddr string) error {
	m, ok := c.(transport.Migrater)
	if !ok {
		return fmt.Errorf("migrate to %s: %T is not an MQTT client from client/mqtt", laddr, c)
	}
	return m.Migrate(ctx, laddr)
}

// Migrate implements transport.Migrater (see the package's Migrate).
func (c *v3Client) Migrate(ctx context.Context, laddr string) error {
	return migrateConn(ctx, &c.lifecycle, c.conn, laddr)
}

// Migrate implements transport.Migrater (see the package's Migrate).
func (c *v5Client) Migrate(ctx context.Context, laddr string) error {
	return migrateConn(ctx, &c.lifecycle, c.conn, laddr)
}

func migrateConn(ctx context.Context, l *lifecycle, tc *timedConn, laddr string) error {
	if err := l.ended("migrate to " + laddr); err != nil {
		return fmt.Errorf("%w (reconnect instead)", err)
	}
	return transport.Migrate(ctx, tc.Conn, laddr)
}
