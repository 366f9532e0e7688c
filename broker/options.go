package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/iotq/iotq/broker/coapfront"
	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/internal/yamlconf"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/coapdtls"
)

// DefaultListen is the listener used when Options.Listen is empty: loopback
// only, like Mosquitto 2 without a configuration.
const DefaultListen = "mqtt://127.0.0.1:1883"

// Options configure a Server. The zero value is valid: one MQTT/TCP listener
// on 127.0.0.1:1883, anonymous access, no persistence, no metrics. Options is
// also the schema of the YAML configuration file (see docs/broker.md).
type Options struct {
	// Listen lists listener URLs: mqtt://, mqtts://, ws://, wss://, quic://
	// HOST:PORT. Port 0 picks a free port. Default: [DefaultListen].
	Listen []string `yaml:"listen"`
	// StateDir holds persistent state: tls/ (generated CA and server
	// certificate, session ticket keys) and store.db (sessions, in-flight and
	// retained messages). Empty: nothing is persisted; if a TLS listener
	// needs a generated certificate, serve.DefaultStateDir() is used for tls/ only.
	StateDir string `yaml:"state_dir"`
	// Store selects persistence when StateDir is set: "bolt" (default, the
	// file STATE_DIR/store.db) or "none" (keep only TLS material in
	// StateDir). Without StateDir nothing is persisted.
	Store string `yaml:"store"`
	// Fsync makes the store fsync every write (survives power loss, slower).
	// Default false: writes reach the OS at once (they survive a crash of
	// the broker process) and the store is synced when the broker closes.
	Fsync bool `yaml:"fsync"`
	// TLS configures mqtts, wss and quic listeners.
	TLS TLSOptions `yaml:"tls"`
	// QUIC tunes quic:// listeners.
	QUIC QUICOptions `yaml:"quic"`
	// Auth configures authentication and authorization.
	Auth AuthOptions `yaml:"auth"`
	// Flow is the slow-consumer policy and queue sizing.
	Flow FlowOptions `yaml:"flow"`
	// Limits bound what one client may ask of the broker.
	Limits LimitsOptions `yaml:"limits"`
	// CoAP configures the CoAP front (coap://, coaps://, coap+tcp://,
	// coaps+tcp://, coap+quic:// listeners; see docs/coap.md).
	CoAP coapfront.Options `yaml:"coap"`
	// Metrics is the listen address (HOST:PORT) of the HTTP server for
	// /metrics (Prometheus) and /healthz. Empty: off.
	Metrics string `yaml:"metrics"`
	// Pprof adds Go's profiling endpoints (/debug/pprof/: CPU, heap,
	// goroutines, allocations) to the metrics server, for profiling the
	// running broker with go tool pprof. They expose the broker's
	// internals: keep the metrics address on loopback or a trusted network.
	// Needs Metrics.
	Pprof bool `yaml:"pprof"`
	// ReadyFile, if set, is written atomically once every listener accepts:
	// JSON {"listeners": [...], "ca_file": "...", "pid": N}.
	ReadyFile string `yaml:"ready_file"`
	// ShutdownTimeout bounds how long Close waits for clients to leave.
	// Default 5s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Log selects the log format and level; used by the iotq command to build
	// Logger. The library itself only uses Logger.
	Log LogOptions `yaml:"log"`
	// Logger receives the broker's logs. nil: discard.
	Logger *slog.Logger `yaml:"-"`
}

// TLSOptions name the server's certificate (internal/certs.ServerCert).
type TLSOptions = certs.ServerCert

// QUICOptions tune quic:// listeners.
type QUICOptions struct {
	// EarlyData is the 0-RTT policy: accept (early data is processed at
	// once; a replayed first flight is processed again), hold (the first
	// MQTT packet, CONNECT, is processed at once, everything after it once
	// the handshake has completed: replayed PUBLISHes are never delivered)
	// or refuse (no 0-RTT). Default hold, or what Allow0RTT says if only it
	// is set. What each guarantees: docs/0rtt.md.
	EarlyData records.EarlyPolicy `yaml:"early_data"`
	// Allow0RTT is the former switch, kept for existing configuration
	// files: true means accept, false refuse. EarlyData wins if both are
	// set; WithDefaults folds it into EarlyData and clears it.
	Allow0RTT *bool `yaml:"allow_0rtt,omitempty"`
	// HandshakeTimeout bounds the QUIC handshake. Default 20s, enough for a
	// 600 ms satellite link with loss.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// IdleTimeout closes a silent QUIC connection. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxStreams is how many client data streams (MQTT over QUIC
	// multi-stream mode, docs/mqtt-quic.md) one connection may have open at
	// once; a stream past it is refused with stream error 0xBE. Default
	// 100; -1 serves one stream per connection (a second one closes the
	// connection with a reason).
	MaxStreams int `yaml:"max_streams"`
	// Delivery is where the broker sends PUBLISH packets to a QUIC client:
	// control (default: the client's first stream, as a single-stream
	// client expects), per-topic (one broker-opened stream per topic) or
	// per-publish (a new broker-opened stream per message).
	Delivery string `yaml:"delivery"`
	// Datagrams accepts QoS 0 PUBLISH packets in QUIC datagrams (RFC 9221)
	// from clients that negotiated them. nil: true.
	Datagrams *bool `yaml:"datagrams"`
	// DatagramDelivery sends QoS 0 deliveries as datagrams to clients that
	// negotiated them (a packet too large goes on a stream). Default false:
	// the client must read datagrams.
	DatagramDelivery bool `yaml:"datagram_delivery"`
}

// AuthOptions configure authentication (password file) and authorization
// (ACL file).
type AuthOptions struct {
	// PasswordFile has lines "user:BCRYPT_HASH" (create them with
	// `iotq broker passwd FILE USER`). Empty: no passwords are checked.
	PasswordFile string `yaml:"password_file"`
	// ACLFile lists topic rules per user (see docs/broker.md). Empty: every
	// authenticated client may read and write every topic.
	ACLFile string `yaml:"acl_file"`
	// AllowAnonymous lets clients without a username connect. nil: true.
	AllowAnonymous *bool `yaml:"allow_anonymous"`
}

// Stores (Options.Store).
const (
	StoreBolt = "bolt" // sessions, in-flight and retained messages in STATE_DIR/store.db
	StoreNone = "none" // no persistence
)

// Slow-consumer policies (FlowOptions.SlowConsumer); see package engine.
const (
	PolicyDrop       = engine.PolicyDrop
	PolicyDisconnect = engine.PolicyDisconnect
)

// FlowOptions set queue sizes and the slow-consumer policy. The engine
// consumes them, so their one home is package engine.
type FlowOptions = engine.FlowOptions

// LimitsOptions bound what one client may ask of the broker (package engine).
type LimitsOptions = engine.LimitsOptions

// LogOptions select the log output of the iotq command (one home,
// shared with the gateway: package serve).
type LogOptions = serve.LogOptions

// Defaults.
const (
	DefaultShutdownTimeout  = 5 * time.Second
	DefaultHandshakeTimeout = 20 * time.Second
	DefaultIdleTimeout      = 120 * time.Second
	DefaultQueueLength      = 512
	DefaultMaxStall         = 2 * time.Second
	DefaultMaxInflight      = 65535
	DefaultMaxPacketSize    = 16 << 20
	DefaultWriteBuffer      = 16 << 10
	DefaultReadBuffer       = 4 << 10
	DefaultParkIdleAfter    = 100 * time.Millisecond
	DefaultWriteTimeout     = 30 * time.Second
	DefaultMaxClientIDLen   = 256
	DefaultMaxSubscriptions = 1000
	DefaultMaxQueuedBytes   = 8 << 20
)

func boolPtr(b bool) *bool { return &b }

// WithDefaults returns a copy of o with every zero field set to its default.
// Slices are copied.
func (o Options) WithDefaults() Options {
	o.Listen = slices.Clone(o.Listen)
	if len(o.Listen) == 0 {
		o.Listen = []string{DefaultListen}
	}
	o.TLS.Hosts = slices.Clone(o.TLS.Hosts)
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.QUIC.EarlyData == "" {
		switch {
		case o.QUIC.Allow0RTT == nil:
			o.QUIC.EarlyData = records.EarlyHold
		case *o.QUIC.Allow0RTT:
			o.QUIC.EarlyData = records.EarlyAccept
		default:
			o.QUIC.EarlyData = records.EarlyRefuse
		}
	}
	o.QUIC.Allow0RTT = nil
	if o.QUIC.HandshakeTimeout == 0 {
		o.QUIC.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.QUIC.IdleTimeout == 0 {
		o.QUIC.IdleTimeout = DefaultIdleTimeout
	}
	if o.Auth.AllowAnonymous == nil {
		o.Auth.AllowAnonymous = boolPtr(true)
	} else {
		o.Auth.AllowAnonymous = boolPtr(*o.Auth.AllowAnonymous)
	}
	if o.Flow.QueueLength == 0 {
		o.Flow.QueueLength = DefaultQueueLength
	}
	if o.Flow.SlowConsumer == "" {
		o.Flow.SlowConsumer = PolicyDrop
	}
	if o.Flow.MaxStall == 0 {
		o.Flow.MaxStall = DefaultMaxStall
	}
	if o.Flow.MaxInflight == 0 {
		o.Flow.MaxInflight = DefaultMaxInflight
	}
	if o.Flow.MaxPacketSize == 0 {
		o.Flow.MaxPacketSize = DefaultMaxPacketSize
	}
	if o.Flow.WriteBuffer == 0 {
		o.Flow.WriteBuffer = DefaultWriteBuffer
	}
	if o.Flow.WriteTimeout == 0 {
		o.Flow.WriteTimeout = DefaultWriteTimeout
	}
	if o.Flow.ReadBuffer == 0 {
		o.Flow.ReadBuffer = DefaultReadBuffer
	}
	if o.Flow.ParkIdleAfter == 0 {
		o.Flow.ParkIdleAfter = DefaultParkIdleAfter
	}
	if o.Limits.MaxSubscriptions == 0 {
		o.Limits.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.Limits.MaxQueuedBytes == 0 {
		o.Limits.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if o.Limits.MaxClientIDLength == 0 {
		o.Limits.MaxClientIDLength = DefaultMaxClientIDLen
	}
	// The CoAP front's defaults, so that --print-config shows what runs;
	// its logger is the broker's business (set when the front starts).
	logger := o.CoAP.Logger
	o.CoAP = o.CoAP.WithDefaults()
	o.CoAP.Logger = logger
	if o.CoAP.DTLSSessions == 0 {
		o.CoAP.DTLSSessions = coapdtls.DefaultSessions
	}
	if o.CoAP.DTLSSessionLifetime == 0 {
		o.CoAP.DTLSSessionLifetime = coapdtls.DefaultSessionLifetime
	}
	if o.Store == "" {
		o.Store = StoreBolt
	}
	o.Log = o.Log.WithDefaults()
	return o
}

// FieldError is one problem with one option. Path names the option as in the
// configuration file ("listen[1]", "quic.idle_timeout"); ParseConfig adds
// file and line.
type FieldError = yamlconf.FieldError

// Validate reports every problem of o at once (errors.Join of *FieldError).
// It checks values only; files are opened by New.
func (o Options) Validate() error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	seen := map[string]int{}
	for i, raw := range o.Listen {
		path := fmt.Sprintf("listen[%d]", i)
		ep, err := transport.ParseURL(raw)
		if err != nil {
			add(path, "%v; want e.g. mqtt://0.0.0.0:1883, mqtts://:8883, ws://:8083/mqtt, wss://:8084/mqtt or quic://:14567", err)
			continue
		}
		if ep.Protocol == "amqp" {
			add(path, "%s: the broker does not speak AMQP; put iotq gateway in front of an AMQP broker (docs/gateway.md)", raw)
			continue
		}
		key := string(ep.Scheme) + " " + ep.Address()
		if ep.Port != 0 {
			if j, ok := seen[key]; ok {
				add(path, "%s is already listed as listen[%d]; remove one", raw, j)
			}
			seen[key] = i
		}
	}
	if (o.TLS.Cert == "") != (o.TLS.Key == "") {
		add("tls", "give both cert and key (or neither, to use a generated certificate)")
	}
	if err := o.CoAP.Validate(); err != nil {
		add("coap", "%v", err)
	}
	if o.Pprof && o.Metrics == "" {
		add("pprof", "the profiling endpoints are served on the metrics server: give metrics (--metrics ADDR, e.g. 127.0.0.1:9100) too")
	}
	if o.ShutdownTimeout < 0 {
		add("shutdown_timeout", "must not be negative, got %v", o.ShutdownTimeout)
	}
	switch o.QUIC.EarlyData {
	case "", records.EarlyAccept, records.EarlyHold, records.EarlyRefuse:
	default:
		add("quic.early_data", "%q: want %s, %s or %s (docs/0rtt.md)", o.QUIC.EarlyData, records.EarlyAccept, records.EarlyHold, records.EarlyRefuse)
	}
	if o.QUIC.HandshakeTimeout < 0 {
		add("quic.handshake_timeout", "must not be negative, got %v", o.QUIC.HandshakeTimeout)
	}
	if o.QUIC.IdleTimeout < 0 {
		add("quic.idle_timeout", "must not be negative, got %v", o.QUIC.IdleTimeout)
	}
	if o.QUIC.MaxStreams < -1 || o.QUIC.MaxStreams > 1<<16 {
		add("quic.max_streams", "want 1 to 65536 streams, 0 for the default %d or -1 for one stream per connection, got %d", DefaultQUICMaxStreams, o.QUIC.MaxStreams)
	}
	switch o.QUIC.Delivery {
	case "", transport.DeliveryControl, transport.DeliveryPerTopic, transport.DeliveryPerPublish:
	default:
		add("quic.delivery", "%q: want %s, %s or %s (docs/mqtt-quic.md)", o.QUIC.Delivery, transport.DeliveryControl, transport.DeliveryPerTopic, transport.DeliveryPerPublish)
	}
	if o.Flow.QueueLength < 0 || o.Flow.QueueLength > 1<<20 {
		add("flow.queue_length", "want 1 to 1048576 messages (0 for the default %d), got %d", DefaultQueueLength, o.Flow.QueueLength)
	}
	switch o.Flow.SlowConsumer {
	case "", PolicyDrop, PolicyDisconnect:
	default:
		add("flow.slow_consumer", "want %q or %q, got %q", PolicyDrop, PolicyDisconnect, o.Flow.SlowConsumer)
	}
	if o.Flow.MaxStall < 0 {
		add("flow.max_stall", "must not be negative, got %v", o.Flow.MaxStall)
	}
	if o.Flow.MaxInflight < 0 || o.Flow.MaxInflight > 65535 {
		add("flow.max_inflight", "want 1 to 65535 (0 for the default), got %d", o.Flow.MaxInflight)
	}
	if o.Flow.MaxPacketSize < 0 || o.Flow.MaxPacketSize > 268435455 {
		add("flow.max_packet_size", "want 1 to 268435455 bytes (0 for the default %d), got %d", DefaultMaxPacketSize, o.Flow.MaxPacketSize)
	}
	if o.Flow.WriteBuffer < 0 {
		add("flow.write_buffer", "must not be negative, got %d", o.Flow.WriteBuffer)
	}
	if o.Flow.WriteTimeout < 0 {
		add("flow.write_timeout", "must not be negative, got %v", o.Flow.WriteTimeout)
	}
	if o.Flow.ReadBuffer < 0 {
		add("flow.read_buffer", "must not be negative, got %d", o.Flow.ReadBuffer)
	}
	if o.Limits.MaxKeepAlive < 0 || o.Limits.MaxKeepAlive > 65535*time.Second || o.Limits.MaxKeepAlive%time.Second != 0 {
		add("limits.max_keep_alive", "want whole seconds from 1s to 65535s (0 for no limit), got %v", o.Limits.MaxKeepAlive)
	}
	if o.Limits.MaxSubscriptions < 0 {
		add("limits.max_subscriptions", "must not be negative (0 for the default %d), got %d", DefaultMaxSubscriptions, o.Limits.MaxSubscriptions)
	}
	if o.Limits.MaxQueuedBytes < -1 {
		add("limits.max_queued_bytes", "want a number of bytes (0 for the default %d, -1 for no limit), got %d", DefaultMaxQueuedBytes, o.Limits.MaxQueuedBytes)
	}
	if o.Limits.MaxClientIDLength < 0 || o.Limits.MaxClientIDLength > 65535 {
		add("limits.max_client_id_length", "want 1 to 65535 bytes (0 for the default %d), got %d", DefaultMaxClientIDLen, o.Limits.MaxClientIDLength)
	}
	switch o.Store {
	case "", StoreBolt, StoreNone:
	default:
		add("store", "want %q or %q, got %q", StoreBolt, StoreNone, o.Store)
	}
	if err := serve.CheckFormat(o.Log.Format); err != nil {
		add("log.format", "%v", err)
	}
	if _, err := serve.ParseLevel(o.Log.Level); err != nil {
		add("log.level", "%v", err)
	}
	return errors.Join(errs...)
}

// needsTLS reports whether any listener needs a certificate.
func (o Options) needsTLS() bool {
	for _, raw := range o.Listen {
		ep, err := transport.ParseURL(raw)
		if err == nil && (ep.Scheme == transport.SchemeTLS || ep.Scheme == transport.SchemeWSS || ep.Scheme == transport.SchemeQUIC ||
			ep.Protocol == "coap" && ep.TLS) {
			return true
		}
	}
	return false
}
