package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/serve"
)

func (a *app) gatewayCommand() *Command {
	c := &Command{
		Name:      "gateway",
		UsageLine: "iotq gateway --route quic://HOST:PORT=tcp://UPSTREAM:PORT [flags]",
		Short:     "put a QUIC front (with 0-RTT) on any TCP broker",
		Long: `Gateway accepts QUIC connections and forwards each one to a TCP (or TLS) broker: the
client's first bidirectional stream is joined to a new upstream connection in both directions,
with half-close and flow control. MQTT over QUIC for Mosquitto, AMQP 1.0 over QUIC for
ActiveMQ Artemis or RabbitMQ, a QUIC front for a broker cluster.

--route quic://HOST:PORT=tcp://UPSTREAM:PORT (repeatable) adds a route. Several upstreams are
separated by commas (tcp:// or tls://); options go in the query of the QUIC URL:
  alpn=amqp            ALPN protocols clients may negotiate (comma list; default mqtt)
  balance=client_hash  upstream choice: round_robin (default) or client_hash
  early_data=accept    0-RTT replay policy: accept, refuse, alpn (default: accept only
                       for the ALPNs in early_data_alpn, default mqtt) or hold (mqtt: only
                       CONNECT before the handshake, no replayed PUBLISH; see docs/gateway.md)
  proxy_protocol=true  send a PROXY protocol v2 header with the client's address upstream
  upstream_ca=FILE, upstream_server_name=NAME, upstream_insecure=true   for tls:// upstreams
Example: --route 'quic://0.0.0.0:5673?alpn=amqp=tcp://127.0.0.1:5672'

The QUIC certificate is --tls-cert/--tls-key, or a CA and certificate generated in
STATE_DIR/tls (ca.pem is what clients trust). Session ticket keys are kept in STATE_DIR/tls, so
0-RTT survives restarts. Without --state-dir, $XDG_STATE_HOME/iotq (or ~/.local/state/iotq).

--config FILE reads YAML (docs/gateway.md); flags given on the command line win over the file
(--route replaces the file's routes). --print-config prints the effective configuration and
exits; --check validates it and exits. --metrics ADDR serves Prometheus /metrics and /healthz.
--ready-file PATH is written (JSON: listeners, ca_file, pid) once every route accepts.

Limits (docs/gateway.md): --first-data-timeout, --data-idle-timeout (QUIC PINGs do not count as
activity), --half-close-timeout, --max-connections, --max-connections-per-source (refused with
QUIC application error 0x105), --retry auto|always|never (QUIC Retry under a handshake flood).
SIGINT or SIGTERM stop the gateway: stop accepting, close forwarded connections, exit 0.`,
		Flags: newFlagSet("gateway"),
	}
	fs := c.Flags
	var routes stringList
	fs.Var(&routes, "route", "route `quic://HOST:PORT[?opts]=tcp://UPSTREAM:PORT[,...]` (repeatable)")
	sf := addServerFlags(fs)
	// Flags that are also configuration keys win over --config.
	type O = gateway.Options
	ov := newOverrides[O](fs)
	ov.String("state-dir", "", "state `dir`ectory: generated TLS certificate and ticket keys", func(o *O) *string { return &o.StateDir })
	ov.String("tls-cert", "", "QUIC server certificate `file` (PEM)", func(o *O) *string { return &o.TLS.Cert })
	ov.String("tls-key", "", "QUIC server key `file` (PEM)", func(o *O) *string { return &o.TLS.Key })
	ov.List("tls-host", "extra DNS name or IP `address` for the generated certificate (repeatable)", func(o *O) *[]string { return &o.TLS.Hosts })
	ov.String("tls-ticket-keys", "", "session ticket keys shared by the gateways behind one address: `file` of hex keys, one per line, the first encrypts (docs/deploy.md)", func(o *O) *string { return &o.TLS.TicketKeysFile })
	ov.Duration("handshake-timeout", gateway.DefaultHandshakeTimeout, "QUIC handshake timeout", func(o *O) *time.Duration { return &o.HandshakeTimeout })
	ov.Duration("idle-timeout", gateway.DefaultIdleTimeout, "close a forwarded connection silent this long", func(o *O) *time.Duration { return &o.IdleTimeout })
	ov.Duration("dial-timeout", gateway.DefaultDialTimeout, "timeout for connecting to one upstream", func(o *O) *time.Duration { return &o.DialTimeout })
	ov.Duration("first-data-timeout", gateway.DefaultFirstDataTimeout, "close a client that sends no data this long after its handshake (no upstream connection is made)", func(o *O) *time.Duration { return &o.FirstDataTimeout })
	ov.Duration("data-idle-timeout", 0, "close a forwarded connection without application data in either direction this long (QUIC PINGs do not count; default: --idle-timeout)", func(o *O) *time.Duration { return &o.DataIdleTimeout })
	ov.Duration("half-close-timeout", gateway.DefaultHalfCloseTimeout, "after one side ended its stream, close the connection if the other has not ended its own within this", func(o *O) *time.Duration { return &o.HalfCloseTimeout })
	ov.Int("max-connections", gateway.DefaultMaxConnections, "refuse QUIC connections past this many held at once (-1: no cap)", func(o *O) *int { return &o.MaxConnections })
	ov.Int("max-connections-per-source", gateway.DefaultMaxPerSource, "refuse QUIC connections past this many from one IP address (-1: no cap)", func(o *O) *int { return &o.MaxConnectionsPerSource })
	ov.String("retry", gateway.RetryAuto, "QUIC Retry (address validation): auto (under a handshake flood), always or never", func(o *O) *string { return &o.Retry })
	ov.Int("retry-rate", gateway.DefaultRetryRate, "retry auto: new connection attempts per second above which Retry is required", func(o *O) *int { return &o.RetryRate })
	ov.Int("retry-handshakes", gateway.DefaultRetryHandshakes, "retry auto: handshakes in progress above which Retry is required", func(o *O) *int { return &o.RetryHandshakes })
	ov.Int("buffer-size", gateway.DefaultBufferSize, "copy buffer per direction and connection, in bytes", func(o *O) *int { return &o.BufferSize })
	ov.String("metrics", "", "serve Prometheus /metrics and /healthz on `ADDR` (e.g. 127.0.0.1:9101)", func(o *O) *string { return &o.Metrics })
	ov.String("ready-file", "", "write route URLs, CA file and pid as JSON to `path` when ready", func(o *O) *string { return &o.ReadyFile })
	ov.String("log-format", "text", "log format: text or json", func(o *O) *string { return &o.Log.Format })
	ov.String("log-level", "info", "log level: debug, info, warn or error", func(o *O) *string { return &o.Log.Level })
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected argument %q (did you mean --route %s?)", args[0], args[0])
		}
		return runServer(ctx, a, sf, serverSpec[O]{
			load:    gateway.LoadConfig,
			marshal: gateway.MarshalConfig,
			flags: func(o *O) error {
				ov.applyTo(o)
				if len(routes) == 0 {
					return nil
				}
				o.Routes = nil // --route replaces the file's routes
				for _, s := range routes {
					r, err := gateway.ParseRoute(s)
					if err != nil {
						return fmt.Errorf("--route: %w", err)
					}
					o.Routes = append(o.Routes, r)
				}
				return nil
			},
			log: func(o O) serve.LogOptions { return o.Log },
			build: func(o O, log *slog.Logger) (service, error) {
				o.Logger = log
				return gateway.New(o)
			},
			listenFlag: "--route",
		})
	})
	return c
}
