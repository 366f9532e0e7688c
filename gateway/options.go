package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/internal/yamlconf"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// Options configure a Gateway; they are also the schema of the YAML
// configuration file (docs/gateway.md). The zero value is not enough: at
// least one Route is needed.
type Options struct {
	// Routes: each one QUIC listener in front of one or more upstreams.
	Routes []Route `yaml:"routes"`
	// StateDir keeps tls/ (the generated CA and server certificate, and the
	// session ticket keys, so 0-RTT survives restarts). Default:
	// $XDG_STATE_HOME/iotq (or ~/.local/state/iotq).
	StateDir string `yaml:"state_dir"`
	// TLS is the certificate QUIC clients see.
	TLS TLSOptions `yaml:"tls"`
	// HandshakeTimeout bounds the QUIC handshake and the wait for the
	// client's first stream. Default 20s (lossy satellite links).
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// IdleTimeout closes a QUIC connection silent this long; the upstream
	// connection is closed with it. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// DialTimeout bounds connecting (and the TLS handshake) to one
	// upstream. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// FirstDataTimeout: a client must deliver its first application bytes
	// (on its first stream) within this long after the QUIC handshake
	// completed, or the connection is closed (CodeFirstDataTimeout) before
	// any upstream connection is opened. Default 10s.
	FirstDataTimeout time.Duration `yaml:"first_data_timeout"`
	// DataIdleTimeout closes a forwarded connection through which no
	// application data flowed, in either direction, for this long
	// (CodeIdleTimeout). QUIC PINGs (keep-alives) do not count, unlike for
	// IdleTimeout. Default: IdleTimeout.
	DataIdleTimeout time.Duration `yaml:"data_idle_timeout"`
	// HalfCloseTimeout: once one side ended its sending direction (QUIC
	// FIN, TCP FIN), the other side has this long to end its own, or the
	// connection is closed (CodeHalfCloseTimeout). Default 30s.
	HalfCloseTimeout time.Duration `yaml:"half_close_timeout"`
	// MaxConnections caps the QUIC connections held at once, handshakes
	// included, over all routes; a new connection past it is refused
	// (CodeConnectionLimit). Default 10000; -1: no cap.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerSource caps the QUIC connections held at once from
	// one source IP address (devices behind one carrier-grade NAT share
	// it: raise it for them). Default 1000; -1: no cap.
	MaxConnectionsPerSource int `yaml:"max_connections_per_source"`
	// Retry selects QUIC address validation (Retry packets, one more round
	// trip, no 0-RTT on that connection): auto (default: only while the
	// rate of new handshakes is above RetryRate or more than
	// RetryHandshakes handshakes are in progress), always or never.
	Retry string `yaml:"retry"`
	// RetryRate is the rate of new connection attempts per second, over
	// all routes, above which Retry is required (retry: auto). Default 200.
	RetryRate int `yaml:"retry_rate"`
	// RetryHandshakes is the number of handshakes in progress, over all
	// routes, above which Retry is required (retry: auto). Default 200.
	RetryHandshakes int `yaml:"retry_handshakes"`
	// BufferSize is the largest copy buffer per direction and connection,
	// in bytes: the most the gateway holds for one direction of one
	// connection (buffers start at 2 KiB and grow while reads fill them).
	// Default 32768.
	BufferSize int `yaml:"buffer_size"`
	// Metrics is HOST:PORT of the HTTP server for /metrics (Prometheus)
	// and /healthz. Empty: off.
	Metrics string `yaml:"metrics"`
	// ReadyFile, if set, is written atomically once every route accepts:
	// JSON {"listeners": [...], "ca_file": "...", "pid": N}.
	ReadyFile string `yaml:"ready_file"`
	// Log selects format and level for the iotq command.
	Log LogOptions `yaml:"log"`
	// Logger receives the gateway's logs. nil: discard.
	Logger *slog.Logger `yaml:"-"`
}

// TLSOptions name the server's certificate (the fields of
// internal/certs.ServerCert) and where the session ticket keys come from.
type TLSOptions struct {
	// Cert and Key are PEM files. Both empty: a CA and a server certificate
	// are generated in STATE_DIR/tls on first start and reused afterwards.
	// Gateways behind one address share one certificate.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Hosts are extra DNS names or IP addresses for the generated server
	// certificate, besides the local host names and addresses.
	Hosts []string `yaml:"hosts"`
	// TicketKeysFile holds the session ticket keys, one per line as 64 hex
	// digits (openssl rand -hex 32), mode 0600: the first key encrypts new
	// tickets, every key decrypts. Gateways behind one address given the
	// same file accept each other's tickets, so a client resumes (and sends
	// 0-RTT) whichever instance it reaches. A running gateway reads the
	// file again when it changed (checked at most once a second, on a
	// handshake), so keys rotate without a restart (docs/deploy.md).
	// Default: the keys in STATE_DIR/tls/ticket.keys, created on first
	// start, one per state directory.
	TicketKeysFile string `yaml:"ticket_keys_file"`
}

// Server returns the QUIC server's TLS configuration
// (certs.ServerCert.Server) with the keys of TicketKeysFile installed when
// it is set; caFile is the generated CA ("" with Cert and Key).
func (t TLSOptions) Server(stateDir string, listenHosts []string) (cfg *tls.Config, caFile string, err error) {
	cfg, caFile, err = certs.ServerCert{Cert: t.Cert, Key: t.Key, Hosts: t.Hosts}.Server(stateDir, listenHosts)
	if err != nil || t.TicketKeysFile == "" {
		return cfg, caFile, err
	}
	keys, err := certs.LoadTicketKeysFile(t.TicketKeysFile)
	if err != nil {
		return nil, "", fmt.Errorf("tls.ticket_keys_file: %w", err)
	}
	cfg.SetSessionTicketKeys(keys)
	return cfg, caFile, nil
}

// LogOptions select the log output of the iotq command (one home,
// shared with the broker: package serve).
type LogOptions = serve.LogOptions

// Route is one QUIC listener and where its connections go.
type Route struct {
	// Listen is the QUIC URL: quic://HOST:PORT (port 0: a free port).
	Listen string `yaml:"listen"`
	// Upstreams are tcp://HOST:PORT or tls://HOST:PORT URLs of the broker
	// (several for a cluster). At least one.
	Upstreams []string `yaml:"upstreams"`
	// ALPN lists the application protocols clients may negotiate, e.g.
	// [amqp] or [mqtt]. Default [mqtt].
	ALPN []string `yaml:"alpn"`
	// Balance picks the upstream of a new connection: round_robin (default)
	// or client_hash (the same client address always gets the same
	// upstream while it is up). Either way the others are tried in turn
	// when the chosen one does not answer.
	Balance string `yaml:"balance"`
	// EarlyData is the 0-RTT replay policy: accept, refuse, alpn (accept
	// only when the negotiated ALPN is in EarlyDataALPN) or hold (0-RTT
	// accepted, but for mqtt only the first MQTT packet, for amqp only
	// what comes before the first transfer frame is forwarded before the
	// handshake completes, so a replayed PUBLISH or transfer never reaches
	// the upstream; other ALPNs: refused). Default alpn.
	EarlyData records.EarlyPolicy `yaml:"early_data"`
	// EarlyDataALPN lists the ALPNs whose replay risk is acceptable for
	// policy alpn. Default [mqtt] (docs/gateway.md says why MQTT and not
	// AMQP).
	EarlyDataALPN []string `yaml:"early_data_alpn"`
	// ProxyProtocol writes a PROXY protocol v2 header with the client's
	// address to each upstream connection first.
	ProxyProtocol bool `yaml:"proxy_protocol"`
	// UpstreamTLS verifies tls:// upstreams.
	UpstreamTLS UpstreamTLS `yaml:"upstream_tls"`
}

// UpstreamTLS configures TLS to tls:// upstreams.
type UpstreamTLS struct {
	// CAFile holds the CA certificates of the upstream. Default: the
	// system roots.
	CAFile string `yaml:"ca_file"`
	// ServerName overrides the name checked. Default: the upstream host.
	ServerName string `yaml:"server_name"`
	// Insecure skips verification (tests only).
	Insecure bool `yaml:"insecure"`
}

// Values of Route.Balance (those of Route.EarlyData: records.EarlyPolicy).
const (
	BalanceRoundRobin = "round_robin"
	BalanceClientHash = "client_hash"
)

// Defaults.
const (
	DefaultHandshakeTimeout = transport.DefaultHandshakeIdleTimeout
	DefaultIdleTimeout      = transport.DefaultMaxIdleTimeout
	DefaultDialTimeout      = 5 * time.Second
	DefaultBufferSize       = 32 << 10
	DefaultFirstDataTimeout = 10 * time.Second
	DefaultHalfCloseTimeout = 30 * time.Second
	DefaultMaxConnections   = 10000
	DefaultMaxPerSource     = 1000
	DefaultRetryRate        = 200
	DefaultRetryHandshakes  = 200
)

// Values of Options.Retry.
const (
	RetryAuto   = "auto"
	RetryAlways = "always"
	RetryNever  = "never"
)

// WithDefaults returns a copy of o with every zero field set to its
// default. Slices are copied.
func (o Options) WithDefaults() Options {
	o.Routes = slices.Clone(o.Routes)
	for i := range o.Routes {
		o.Routes[i] = o.Routes[i].withDefaults()
	}
	if o.StateDir == "" {
		o.StateDir = serve.DefaultStateDir()
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.FirstDataTimeout == 0 {
		o.FirstDataTimeout = DefaultFirstDataTimeout
	}
	if o.DataIdleTimeout == 0 {
		o.DataIdleTimeout = o.IdleTimeout
	}
	if o.HalfCloseTimeout == 0 {
		o.HalfCloseTimeout = DefaultHalfCloseTimeout
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerSource == 0 {
		o.MaxConnectionsPerSource = DefaultMaxPerSource
	}
	if o.Retry == "" {
		o.Retry = RetryAuto
	}
	if o.RetryRate == 0 {
		o.RetryRate = DefaultRetryRate
	}
	if o.RetryHandshakes == 0 {
		o.RetryHandshakes = DefaultRetryHandshakes
	}
	o.Log = o.Log.WithDefaults()
	return o
}

func (r Route) withDefaults() Route {
	r.Upstreams = slices.Clone(r.Upstreams)
	r.ALPN = slices.Clone(r.ALPN)
	if len(r.ALPN) == 0 {
		r.ALPN = []string{transport.ALPN}
	}
	if r.Balance == "" {
		r.Balance = BalanceRoundRobin
	}
	if r.EarlyData == "" {
		r.EarlyData = records.EarlyALPN
	}
	r.EarlyDataALPN = slices.Clone(r.EarlyDataALPN)
	if len(r.EarlyDataALPN) == 0 {
		r.EarlyDataALPN = []string{transport.ALPN}
	}
	return r
}

// FieldError is one problem of Options, with the path of the field
// ("routes[0].upstreams[1]"); ParseConfig adds file and line.
type FieldError = yamlconf.FieldError

// Validate reports every problem of o at once (errors.Join of
// *FieldError).
func (o Options) Validate() error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if len(o.Routes) == 0 {
		add("routes", "no route: give at least one, e.g. --route quic://0.0.0.0:5673=tcp://127.0.0.1:5672")
	}
	listens := map[string]int{}
	for i, r := range o.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		ep, err := transport.ParseURL(r.Listen)
		switch {
		case r.Listen == "":
			add(p+".listen", "empty; want quic://HOST:PORT")
		case err != nil:
			add(p+".listen", "%v", err)
		case ep.Scheme != transport.SchemeQUIC:
			add(p+".listen", "%q is not a quic:// URL; the gateway listens on QUIC only", r.Listen)
		default:
			if j, dup := listens[ep.Address()]; dup && ep.Port != 0 {
				add(p+".listen", "%s is also routes[%d].listen; one route per address", ep.Address(), j)
			}
			listens[ep.Address()] = i
		}
		if len(r.Upstreams) == 0 {
			add(p+".upstreams", "no upstream; want tcp://HOST:PORT or tls://HOST:PORT")
		}
		for j, u := range r.Upstreams {
			if _, err := parseUpstream(u); err != nil {
				add(fmt.Sprintf("%s.upstreams[%d]", p, j), "%v", err)
			}
		}
		for j, a := range r.ALPN {
			if a == "" || len(a) > 255 {
				add(fmt.Sprintf("%s.alpn[%d]", p, j), "%q: want 1 to 255 bytes, e.g. amqp or mqtt", a)
			}
		}
		switch r.Balance {
		case "", BalanceRoundRobin, BalanceClientHash:
		default:
			add(p+".balance", "%q: want %s or %s", r.Balance, BalanceRoundRobin, BalanceClientHash)
		}
		switch r.EarlyData {
		case "", records.EarlyAccept, records.EarlyRefuse, records.EarlyALPN, records.EarlyHold:
		default:
			add(p+".early_data", "%q: want %s, %s, %s or %s", r.EarlyData, records.EarlyAccept, records.EarlyRefuse, records.EarlyALPN, records.EarlyHold)
		}
		if r.UpstreamTLS.CAFile != "" {
			if _, err := os.Stat(r.UpstreamTLS.CAFile); err != nil {
				add(p+".upstream_tls.ca_file", "%v", err)
			}
		}
	}
	if (o.TLS.Cert == "") != (o.TLS.Key == "") {
		add("tls", "give both cert and key, or neither (then a certificate is generated in the state directory)")
	}
	for _, f := range []struct{ path, name string }{{"tls.cert", o.TLS.Cert}, {"tls.key", o.TLS.Key}} {
		if f.name != "" {
			if _, err := os.Stat(f.name); err != nil {
				add(f.path, "%v", err)
			}
		}
	}
	if o.TLS.TicketKeysFile != "" {
		if _, err := certs.LoadTicketKeysFile(o.TLS.TicketKeysFile); err != nil {
			add("tls.ticket_keys_file", "%v", err)
		}
	}
	for _, d := range []struct {
		path string
		v    time.Duration
	}{{"handshake_timeout", o.HandshakeTimeout}, {"idle_timeout", o.IdleTimeout}, {"dial_timeout", o.DialTimeout},
		{"first_data_timeout", o.FirstDataTimeout}, {"data_idle_timeout", o.DataIdleTimeout}, {"half_close_timeout", o.HalfCloseTimeout}} {
		if d.v < 0 {
			add(d.path, "%s: must not be negative", d.v)
		}
	}
	for _, c := range []struct {
		path string
		v    int
	}{{"max_connections", o.MaxConnections}, {"max_connections_per_source", o.MaxConnectionsPerSource}} {
		if c.v < -1 {
			add(c.path, "%d: want a positive number, 0 (the default) or -1 (no cap)", c.v)
		}
	}
	switch o.Retry {
	case "", RetryAuto, RetryAlways, RetryNever:
	default:
		add("retry", "%q: want %s, %s or %s", o.Retry, RetryAuto, RetryAlways, RetryNever)
	}
	for _, c := range []struct {
		path string
		v    int
	}{{"retry_rate", o.RetryRate}, {"retry_handshakes", o.RetryHandshakes}} {
		if c.v < 0 {
			add(c.path, "%d: must not be negative", c.v)
		}
	}
	if o.BufferSize < 0 || (o.BufferSize > 0 && o.BufferSize < 512) || o.BufferSize > 16<<20 {
		add("buffer_size", "%d: want 512 to 16777216 bytes", o.BufferSize)
	}
	if err := serve.CheckFormat(o.Log.Format); err != nil {
		add("log.format", "%v", err)
	}
	if _, err := serve.ParseLevel(o.Log.Level); err != nil {
		add("log.level", "%v", err)
	}
	return errors.Join(errs...)
}

// upstream is a parsed upstream URL.
type upstream struct {
	raw  string
	addr string // host:port
	host string
	tls  bool
}

func parseUpstream(raw string) (upstream, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return upstream{}, fmt.Errorf("upstream %q: %w", raw, err)
	}
	var tlsOn bool
	switch strings.ToLower(u.Scheme) {
	case "tcp":
	case "tls":
		tlsOn = true
	default:
		return upstream{}, fmt.Errorf("upstream %q: scheme %q; want tcp://HOST:PORT or tls://HOST:PORT", raw, u.Scheme)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return upstream{}, fmt.Errorf("upstream %q: want %s://HOST:PORT with both host and port", raw, u.Scheme)
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p <= 0 || p > 65535 {
		return upstream{}, fmt.Errorf("upstream %q: bad port %q (want 1-65535)", raw, u.Port())
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return upstream{}, fmt.Errorf("upstream %q: remove the path or query; want %s://HOST:PORT", raw, u.Scheme)
	}
	return upstream{raw: raw, addr: u.Host, host: u.Hostname(), tls: tlsOn}, nil
}

// ParseRoute parses the command-line form of a route:
//
//	quic://HOST:PORT[?alpn=amqp,mqtt&early_data=accept&balance=client_hash&proxy_protocol=true]=tcp://UP:PORT[,tls://UP2:PORT]
//
// Query parameters on the QUIC URL set the other Route fields (alpn,
// balance, early_data, early_data_alpn, proxy_protocol, upstream_ca,
// upstream_server_name, upstream_insecure).
func ParseRoute(s string) (Route, error) {
	i := -1
	for _, sep := range []string{"=tcp://", "=tls://"} {
		if j := strings.Index(strings.ToLower(s), sep); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	if i < 0 {
		return Route{}, fmt.Errorf("route %q: want quic://HOST:PORT=tcp://UPSTREAM:PORT (upstream scheme tcp or tls)", s)
	}
	listen, ups := s[:i], s[i+1:]
	var r Route
	if q := strings.IndexByte(listen, '?'); q >= 0 {
		vals, err := url.ParseQuery(listen[q+1:])
		if err != nil {
			return Route{}, fmt.Errorf("route %q: options: %w", s, err)
		}
		listen = listen[:q]
		for k, v := range vals {
			val := v[len(v)-1]
			switch k {
			case "alpn":
				r.ALPN = splitList(val)
			case "balance":
				r.Balance = val
			case "early_data":
				r.EarlyData = records.EarlyPolicy(val)
			case "early_data_alpn":
				r.EarlyDataALPN = splitList(val)
			case "proxy_protocol":
				b, err := strconv.ParseBool(val)
				if err != nil {
					return Route{}, fmt.Errorf("route %q: proxy_protocol=%q: want true or false", s, val)
				}
				r.ProxyProtocol = b
			case "upstream_ca":
				r.UpstreamTLS.CAFile = val
			case "upstream_server_name":
				r.UpstreamTLS.ServerName = val
			case "upstream_insecure":
				b, err := strconv.ParseBool(val)
				if err != nil {
					return Route{}, fmt.Errorf("route %q: upstream_insecure=%q: want true or false", s, val)
				}
				r.UpstreamTLS.Insecure = b
			default:
				return Route{}, fmt.Errorf("route %q: unknown option %q; want alpn, balance, early_data, early_data_alpn, proxy_protocol, upstream_ca, upstream_server_name or upstream_insecure", s, k)
			}
		}
	}
	r.Listen = listen
	r.Upstreams = splitList(ups)
	return r, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
