package core

import (
	"context"
	"fmt"

	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// DialFunc is what a protocol package provides to client's dialer table:
// connect to ep (whose Protocol is the package's) with options o and return
// once the server accepted the session. o has its defaults filled in.
type DialFunc func(ctx context.Context, ep endpoint.Endpoint, o Options) (Client, error)

// DialOptions returns the transport options of o (TLS from CAFile,
// Insecure, ServerName and TLSConfig; QUIC tuning; logger), without the
// session cache (see DialTransport).
func (o Options) DialOptions() transport.DialOptions {
	return transport.DialOptions{
		TLSConfig:  o.TLSConfig,
		CAFile:     o.CAFile,
		Insecure:   o.Insecure,
		ServerName: o.ServerName,
		QUIC:       o.QUIC,
		Logger:     o.Logger,
	}
}

// DialTransport opens the transport connection of ep for a protocol
// package, with the persistent ticket cache of o.SessionCacheFile if set.
// The caller closes the conn and then the cache (nil-safe; Close writes the
// file). The error is transport's *DialError (one hint) or says which
// option to check.
func DialTransport(ctx context.Context, ep endpoint.Endpoint, o Options) (transport.Conn, *transport.FileSessionCache, error) {
	dopts := o.DialOptions()
	var cache *transport.FileSessionCache
	if o.SessionCacheFile != "" {
		var err error
		cache, err = transport.NewFileSessionCache(o.SessionCacheFile, o.Logger)
		if err != nil {
			return nil, nil, fmt.Errorf("session cache %s: %w (check --session-cache)", o.SessionCacheFile, err)
		}
		dopts.SessionCache = cache
	}
	c, err := transport.DialEndpoint(ctx, ep, dopts)
	if err != nil {
		_ = cache.Close()
		return nil, nil, err
	}
	return c, cache, nil
}
