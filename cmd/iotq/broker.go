package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/records"
)

func (a *app) brokerCommand() *Command {
	c := &Command{
		Name:      "broker",
		UsageLine: "iotq broker [flags]  |  iotq broker passwd FILE USER",
		Short:     "run the MQTT broker (TCP, TLS, WebSocket, QUIC)",
		Long: `Broker runs an MQTT 3.1.1 and 5.0 broker on every --listen URL at the same time:
mqtt://HOST:PORT (TCP, default port 1883), mqtts:// (TLS, 8883), ws://HOST:PORT/mqtt (8083),
wss:// (8084) and quic:// (QUIC, ALPN "mqtt", UDP 14567). Port 0 picks a free port.
CoAP listeners serve the same topic space: coap:// (UDP 5683), coaps:// (DTLS 1.2, PSK
identities from coap.psk_file in --config, 5684), coap+tcp:// (5683), coaps+tcp:// (5684) and
coap+quic:// (experimental, 5685); resources and coap.* settings in docs/coap.md.
Without any --listen or config file it listens on mqtt://127.0.0.1:1883 only (loopback, like
Mosquitto 2) and says so.

TLS listeners use --tls-cert/--tls-key, or else a CA and server certificate generated on first
start in STATE_DIR/tls (ca.pem is what clients trust; its path is logged) and reused afterwards;
--tls-host adds names or addresses to the generated certificate. Session ticket keys are kept
there too, so TLS resumption and QUIC 0-RTT survive restarts. Without --state-dir the generated
certificate goes to $XDG_STATE_HOME/iotq (or ~/.local/state/iotq) and nothing else is persisted.
With --state-dir, persistent sessions, queued and in-flight QoS 1/2 messages and retained
messages survive a restart (STATE_DIR/store.db and inflight.log).

--password-file holds "user:BCRYPT_HASH" lines; add one with
  iotq broker passwd FILE USER      (on a terminal: asks twice, without echo; otherwise
                                    the first line of standard input)
--acl-file grants topics per user (see docs/broker.md). Anonymous clients are allowed unless
--allow-anonymous=false.

--config FILE reads YAML (docs/broker.md); flags given on the command line win over the file.
--print-config prints the effective configuration and exits; --check validates it and exits.
--metrics ADDR serves Prometheus /metrics and /healthz (--pprof adds Go's /debug/pprof/ there:
keep ADDR on loopback). --ready-file PATH is written (JSON:
listeners, ca_file, pid) once every listener accepts. SIGINT or SIGTERM stop the broker
gracefully: stop accepting, disconnect clients, flush the store, exit 0.`,
		Flags: newFlagSet("broker"),
	}
	fs := c.Flags
	sf := addServerFlags(fs)
	// Flags that are also configuration keys: given on the command line,
	// they win over --config.
	type O = broker.Options
	ov := newOverrides[O](fs)
	ov.List("listen", "listener `URL` (repeatable): mqtt://, mqtts://, ws://, wss://, quic://HOST:PORT", func(o *O) *[]string { return &o.Listen })
	ov.String("state-dir", "", "state `dir`ectory: generated TLS certificate, ticket keys, persistent sessions", func(o *O) *string { return &o.StateDir })
	ov.String("tls-cert", "", "server certificate `file` (PEM)", func(o *O) *string { return &o.TLS.Cert })
	ov.String("tls-key", "", "server key `file` (PEM)", func(o *O) *string { return &o.TLS.Key })
	ov.List("tls-host", "extra DNS name or IP `address` for the generated certificate (repeatable)", func(o *O) *[]string { return &o.TLS.Hosts })
	early := &earlyDataFlag{v: records.EarlyHold}
	ov.Var("quic-0rtt", "QUIC 0-RTT `policy`: accept, hold (CONNECT at once, the rest after the handshake: no replayed PUBLISH) or refuse; true = accept, false = refuse; give it as --quic-0rtt=VALUE (docs/0rtt.md)", early, func(o *O) { o.QUIC.EarlyData = early.v })
	ov.Duration("quic-handshake-timeout", broker.DefaultHandshakeTimeout, "QUIC handshake timeout", func(o *O) *time.Duration { return &o.QUIC.HandshakeTimeout })
	ov.Duration("quic-idle-timeout", broker.DefaultIdleTimeout, "QUIC idle timeout", func(o *O) *time.Duration { return &o.QUIC.IdleTimeout })
	ov.String("password-file", "", "password `file` (user:BCRYPT_HASH lines)", func(o *O) *string { return &o.Auth.PasswordFile })
	ov.String("acl-file", "", "ACL `file`", func(o *O) *string { return &o.Auth.ACLFile })
	ov.BoolPtr("allow-anonymous", true, "allow clients without a username", func(o *O) **bool { return &o.Auth.AllowAnonymous })
	ov.String("metrics", "", "serve Prometheus /metrics and /healthz on `ADDR` (e.g. 127.0.0.1:9100)", func(o *O) *string { return &o.Metrics })
	ov.Bool("pprof", false, "also serve Go's profiling endpoints /debug/pprof/ on the --metrics address (exposes internals: keep it on loopback)", func(o *O) *bool { return &o.Pprof })
	ov.String("ready-file", "", "write listener URLs, CA file and pid as JSON to `path` when ready", func(o *O) *string { return &o.ReadyFile })
	ov.String("log-format", "text", "log format: text or json", func(o *O) *string { return &o.Log.Format })
	ov.String("log-level", "info", "log level: debug, info, warn or error", func(o *O) *string { return &o.Log.Level })
	ov.Int("queue-length", broker.DefaultQueueLength, "outbound queue per client, in messages", func(o *O) *int { return &o.Flow.QueueLength })
	ov.String("slow-consumer", broker.PolicyDrop, "slow-consumer policy: drop (QoS 0 only, after --max-stall) or disconnect", func(o *O) *string { return &o.Flow.SlowConsumer })
	ov.Duration("max-stall", broker.DefaultMaxStall, "how long publishers wait for a congested subscriber that makes no progress before it counts as stalled", func(o *O) *time.Duration { return &o.Flow.MaxStall })
	ov.Duration("shutdown-timeout", broker.DefaultShutdownTimeout, "how long to wait for clients to leave on shutdown", func(o *O) *time.Duration { return &o.ShutdownTimeout })
	ov.Int("max-queued-bytes", broker.DefaultMaxQueuedBytes, "bytes one client's session may hold for delivery, counted as payload + topic + properties + 176 B per held message (-1: no limit); beyond it, messages for an offline or stalled client are dropped and counted", func(o *O) *int { return &o.Limits.MaxQueuedBytes })
	ov.Duration("write-timeout", broker.DefaultWriteTimeout, "disconnect a client when one write to it blocks this long", func(o *O) *time.Duration { return &o.Flow.WriteTimeout })
	ov.String("store", broker.StoreBolt, "persistence with --state-dir: bolt (STATE_DIR/store.db) or none", func(o *O) *string { return &o.Store })
	ov.Bool("fsync", false, "fsync the store on every write (slower; survives power loss)", func(o *O) *bool { return &o.Fsync })
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 && args[0] == "passwd" {
			return a.brokerPasswd(args[1:])
		}
		if len(args) > 0 {
			return usageErrorf("unexpected argument %q (did you mean --listen %s?)", args[0], args[0])
		}
		return runServer(ctx, a, sf, serverSpec[O]{
			load:    broker.LoadConfig,
			marshal: broker.MarshalConfig,
			flags:   func(o *O) error { ov.applyTo(o); return nil },
			log:     func(o O) serve.LogOptions { return o.Log },
			build: func(o O, log *slog.Logger) (service, error) {
				o.Logger = log
				return broker.New(o)
			},
			listenFlag: "--listen",
		})
	})
	return c
}

// brokerPasswd implements "iotq broker passwd FILE USER".
func (a *app) brokerPasswd(args []string) error {
	if slices.Contains(args, "-h") || slices.Contains(args, "--help") || slices.Contains(args, "-help") {
		return flag.ErrHelp
	}
	if len(args) != 2 {
		return usageErrorf("usage: iotq broker passwd FILE USER (the password: typed twice on a terminal, else the first line of standard input)")
	}
	var pw []byte
	var err error
	if fd := int(a.stdin.Fd()); term.IsTerminal(fd) {
		pw, err = a.promptPassword(fd)
	} else {
		pw, err = readPassword(a.stdin)
	}
	if err != nil {
		return err
	}
	if err := broker.SetPassword(args[0], args[1], pw); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	fmt.Fprintf(a.stderr, "user %q set in %s\n", args[1], args[0])
	return nil
}

// promptPassword asks twice on a terminal, with echo off (what the user
// types must not stay on the screen or in a recording of it), as
// mosquitto_passwd does.
func (a *app) promptPassword(fd int) ([]byte, error) {
	fmt.Fprint(a.stderr, "Password: ")
	pw, err := term.ReadPassword(fd)
	fmt.Fprintln(a.stderr)
	if err != nil {
		return nil, fmt.Errorf("passwd: read password from the terminal: %w", err)
	}
	fmt.Fprint(a.stderr, "Reenter password: ")
	again, err := term.ReadPassword(fd)
	fmt.Fprintln(a.stderr)
	if err != nil {
		return nil, fmt.Errorf("passwd: read password from the terminal: %w", err)
	}
	if !bytes.Equal(pw, again) {
		return nil, errors.New("passwd: the passwords differ; nothing was changed, run it again")
	}
	return pw, nil
}

// readPassword reads the first line of r (standard input that is not a
// terminal: a pipe or a file).
func readPassword(r io.Reader) ([]byte, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("passwd: read password from standard input: %w", err)
	}
	return []byte(strings.TrimRight(line, "\r\n")), nil
}

// earlyDataFlag is --quic-0rtt: a policy name, or a boolean for
// compatibility with the former switch (a bare --quic-0rtt or =true is
// accept, =false is refuse).
type earlyDataFlag struct{ v records.EarlyPolicy }

func (f *earlyDataFlag) String() string {
	if f == nil {
		return ""
	}
	return string(f.v)
}

func (f *earlyDataFlag) IsBoolFlag() bool { return true }

func (f *earlyDataFlag) Set(s string) error {
	switch p := records.EarlyPolicy(strings.ToLower(s)); p {
	case "true":
		f.v = records.EarlyAccept
	case "false":
		f.v = records.EarlyRefuse
	case records.EarlyAccept, records.EarlyHold, records.EarlyRefuse:
		f.v = p
	default:
		return fmt.Errorf("%q: want accept, hold or refuse (or true/false for accept/refuse)", s)
	}
	return nil
}
