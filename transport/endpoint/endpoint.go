package endpoint

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Scheme is a URL scheme of the scheme table ("mqtt", "quic", "coap+tcp").
type Scheme string

// Protocol is the application protocol spoken over a transport.
type Protocol string

// Transport is how the bytes travel.
type Transport string

// URL schemes (one row each in Schemes).
const (
	SchemeMQTT     Scheme = "mqtt"      // MQTT over TCP
	SchemeMQTTS    Scheme = "mqtts"     // MQTT over TLS
	SchemeWS       Scheme = "ws"        // MQTT over WebSocket
	SchemeWSS      Scheme = "wss"       // MQTT over WebSocket over TLS
	SchemeQUIC     Scheme = "quic"      // MQTT over QUIC
	SchemeCoAP     Scheme = "coap"      // CoAP over UDP (RFC 7252)
	SchemeCoAPS    Scheme = "coaps"     // CoAP over DTLS 1.2 (RFC 7252)
	SchemeCoAPTCP  Scheme = "coap+tcp"  // CoAP over TCP (RFC 8323)
	SchemeCoAPSTCP Scheme = "coaps+tcp" // CoAP over TLS (RFC 8323)
	SchemeCoAPQUIC Scheme = "coap+quic" // CoAP over QUIC, experimental
	SchemeAMQP     Scheme = "amqp"      // AMQP 1.0 over TCP
	SchemeAMQPS    Scheme = "amqps"     // AMQP 1.0 over TLS
	SchemeAMQPQUIC Scheme = "amqp+quic" // AMQP 1.0 over QUIC (through iotq gateway)
)

// Protocols.
const (
	ProtocolMQTT Protocol = "mqtt"
	ProtocolCoAP Protocol = "coap"
	ProtocolAMQP Protocol = "amqp"
)

// Transports.
const (
	TransportTCP  Transport = "tcp"
	TransportTLS  Transport = "tls"
	TransportWS   Transport = "ws"
	TransportWSS  Transport = "wss"
	TransportQUIC Transport = "quic"
	TransportUDP  Transport = "udp"
	TransportDTLS Transport = "dtls"
)

// ALPN identifiers used on QUIC (and TLS where a protocol registered one).
const (
	ALPNMQTT     = "mqtt"          // MQTT over QUIC (EMQX, NanoMQ single-stream mode)
	ALPNCoAP     = "coap"          // CoAP over TLS, registered by RFC 8323
	ALPNCoAPQUIC = "coap-quic-exp" // private: CoAP over QUIC has no IETF document
	ALPNAMQP     = "amqp"          // AMQP over QUIC through iotq gateway
)

// Row is one line of the scheme table.
type Row struct {
	Scheme      Scheme
	Protocol    Protocol
	Transport   Transport
	DefaultPort int
	TLS         bool   // the transport is encrypted (TLS, DTLS or QUIC)
	ALPN        string // TLS application protocol offered by clients ("" = none)
	DefaultPath string // path filled in when the URL has none (WebSocket: /mqtt)
	// Path says whether the URL may carry a path: for WebSocket the HTTP
	// path, for CoAP the resource (topic), for AMQP the node address.
	Path bool
	// Experimental marks rows with no standard behind them.
	Experimental bool
}

// Schemes returns the scheme table, in the order of the wire conventions
// (docs/architecture.md). The slice is a fresh copy.
func Schemes() []Row {
	return []Row{
		{Scheme: SchemeMQTT, Protocol: ProtocolMQTT, Transport: TransportTCP, DefaultPort: 1883},
		{Scheme: SchemeMQTTS, Protocol: ProtocolMQTT, Transport: TransportTLS, DefaultPort: 8883, TLS: true},
		{Scheme: SchemeWS, Protocol: ProtocolMQTT, Transport: TransportWS, DefaultPort: 8083, DefaultPath: "/mqtt", Path: true},
		{Scheme: SchemeWSS, Protocol: ProtocolMQTT, Transport: TransportWSS, DefaultPort: 8084, TLS: true, DefaultPath: "/mqtt", Path: true},
		{Scheme: SchemeQUIC, Protocol: ProtocolMQTT, Transport: TransportQUIC, DefaultPort: 14567, TLS: true, ALPN: ALPNMQTT},
		{Scheme: SchemeCoAP, Protocol: ProtocolCoAP, Transport: TransportUDP, DefaultPort: 5683, Path: true},
		{Scheme: SchemeCoAPS, Protocol: ProtocolCoAP, Transport: TransportDTLS, DefaultPort: 5684, TLS: true, Path: true},
		{Scheme: SchemeCoAPTCP, Protocol: ProtocolCoAP, Transport: TransportTCP, DefaultPort: 5683, Path: true},
		{Scheme: SchemeCoAPSTCP, Protocol: ProtocolCoAP, Transport: TransportTLS, DefaultPort: 5684, TLS: true, ALPN: ALPNCoAP, Path: true},
		{Scheme: SchemeCoAPQUIC, Protocol: ProtocolCoAP, Transport: TransportQUIC, DefaultPort: 5685, TLS: true, ALPN: ALPNCoAPQUIC, Path: true, Experimental: true},
		{Scheme: SchemeAMQP, Protocol: ProtocolAMQP, Transport: TransportTCP, DefaultPort: 5672, Path: true},
		{Scheme: SchemeAMQPS, Protocol: ProtocolAMQP, Transport: TransportTLS, DefaultPort: 5671, TLS: true, Path: true},
		{Scheme: SchemeAMQPQUIC, Protocol: ProtocolAMQP, Transport: TransportQUIC, DefaultPort: 5673, TLS: true, ALPN: ALPNAMQP, Path: true},
	}
}

// aliases are other spellings accepted for a scheme.
func aliases() map[string]Scheme {
	return map[string]Scheme{"tcp": SchemeMQTT, "tls": SchemeMQTTS, "ssl": SchemeMQTTS, "mqtt+ssl": SchemeMQTTS, "amqp+ssl": SchemeAMQPS}
}

// Lookup returns the row of scheme s (case-insensitive, aliases accepted).
func Lookup(s string) (Row, bool) {
	s = strings.ToLower(s)
	if a, ok := aliases()[s]; ok {
		s = string(a)
	}
	for _, r := range Schemes() {
		if string(r.Scheme) == s {
			return r, true
		}
	}
	return Row{}, false
}

// SchemeNames returns the scheme names of the table, for messages. With
// protocols given, only the schemes of those protocols.
func SchemeNames(protocols ...Protocol) []string {
	var out []string
	for _, r := range Schemes() {
		if len(protocols) == 0 || containsProto(protocols, r.Protocol) {
			out = append(out, string(r.Scheme))
		}
	}
	return out
}

func containsProto(ps []Protocol, p Protocol) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// Endpoint is a parsed URL: which protocol, over which transport, to which
// address, with which options. The zero value is not a valid endpoint; make
// one with Parse.
type Endpoint struct {
	Scheme    Scheme
	Protocol  Protocol
	Transport Transport
	Host      string // without port; empty means all interfaces when listening
	Port      int
	Path      string // WebSocket path, CoAP resource, AMQP address ("" if none)
	TLS       bool   // encrypted transport (from the scheme table)
	ALPN      string // application protocol for TLS/QUIC (from the scheme table)
	RawQuery  string // options given as ?key=value (see Options), "" if none
}

// Options returns the ?key=value options of the URL (empty if none).
func (e Endpoint) Options() url.Values {
	v, _ := url.ParseQuery(e.RawQuery)
	return v
}

// Row returns the scheme-table row of e.
func (e Endpoint) Row() Row {
	r, _ := Lookup(string(e.Scheme))
	return r
}

// Address returns host:port.
func (e Endpoint) Address() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// String returns the canonical URL (scheme from the table, explicit port).
func (e Endpoint) String() string {
	u := url.URL{Scheme: string(e.Scheme), Host: e.Address(), Path: e.Path}
	u.RawQuery = e.RawQuery
	return u.String()
}

// Errors of Parse; the returned error wraps one of them and says what to
// write instead.
var (
	ErrNoScheme      = errors.New("no scheme")
	ErrUnknownScheme = errors.New("unknown scheme")
	ErrBadHost       = errors.New("bad host")
	ErrBadPort       = errors.New("bad port")
	ErrPath          = errors.New("path not allowed")
	ErrMalformed     = errors.New("malformed URL")
)

// Error is a URL that could not be parsed.
type Error struct {
	URL  string
	Err  error  // one of the Err* values above
	Hint string // what to write instead
}

func (e *Error) Error() string {
	return fmt.Sprintf("URL %q: %v (%s)", e.URL, e.Err, e.Hint)
}

func (e *Error) Unwrap() error { return e.Err }

// example is the hint for a scheme-less or malformed URL.
const example = "write SCHEME://HOST[:PORT], e.g. mqtt://127.0.0.1:1883 or quic://broker:14567"

// Parse parses raw ("quic://127.0.0.1:14567", "ws://h/mqtt",
// "coap://h/sensors/1?con=1") into an Endpoint, filling in the default port
// and path from the scheme table. Every error is an *Error that wraps one of
// the Err* values and says what to write.
func Parse(raw string) (Endpoint, error) {
	fail := func(err error, hint string, args ...any) (Endpoint, error) {
		return Endpoint{}, &Error{URL: raw, Err: err, Hint: fmt.Sprintf(hint, args...)}
	}
	schemeText, rest, ok := strings.Cut(raw, "://")
	if !ok || schemeText == "" {
		return fail(ErrNoScheme, "%s; schemes: %s", example, strings.Join(SchemeNames(), ", "))
	}
	row, ok := Lookup(schemeText)
	if !ok {
		return fail(ErrUnknownScheme, "%q is not one of %s", schemeText, strings.Join(SchemeNames(), ", "))
	}
	u, err := url.Parse(string(row.Scheme) + "://" + rest)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fail(ErrMalformed, "%v; %s", err, example)
	}
	if u.User != nil {
		return fail(ErrMalformed, "user information in the URL is not supported; give credentials as options (--username, --password)")
	}
	ep := Endpoint{
		Scheme: row.Scheme, Protocol: row.Protocol, Transport: row.Transport,
		Host: u.Hostname(), Port: row.DefaultPort, Path: u.Path,
		TLS: row.TLS, ALPN: row.ALPN,
	}
	if u.RawQuery != "" {
		if _, err := url.ParseQuery(u.RawQuery); err != nil {
			return fail(ErrMalformed, "options %q: %v; write ?key=value&key=value", u.RawQuery, err)
		}
		ep.RawQuery = u.RawQuery
	}
	if !validHost(ep.Host) {
		return fail(ErrBadHost, "%q: want a DNS name or an IP address (IPv6 in brackets)", ep.Host)
	}
	if p := u.Port(); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil || port < 0 || port > 65535 {
			return fail(ErrBadPort, "%q: want 0-65535", p)
		}
		ep.Port = port
	} else if strings.HasSuffix(u.Host, ":") {
		return fail(ErrBadPort, "empty port after ':'; write a port or leave the colon out for %d", row.DefaultPort)
	}
	switch {
	case row.Path && ep.Path == "":
		ep.Path = row.DefaultPath
	case !row.Path && ep.Path == "/":
		ep.Path = ""
	case !row.Path && ep.Path != "":
		return fail(ErrPath, "%s:// takes no path (%q); remove it", row.Scheme, ep.Path)
	}
	return ep, nil
}

// validHost accepts "", DNS names (letters, digits, '-', '_', '.') and IP
// addresses, IPv6 with an optional zone made of name characters.
func validHost(h string) bool {
	if h == "" {
		return true
	}
	if len(h) > 253 {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return nameChars(a.Zone())
	}
	return !strings.Contains(h, ":") && nameChars(h)
}

func nameChars(s string) bool {
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}
