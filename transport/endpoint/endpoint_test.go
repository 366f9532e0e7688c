package endpoint

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	mqtt := func(s Scheme, tr Transport, host string, port int, path string, tls bool, alpn string) Endpoint {
		return Endpoint{Scheme: s, Protocol: ProtocolMQTT, Transport: tr, Host: host, Port: port, Path: path, TLS: tls, ALPN: alpn}
	}
	cases := []struct {
		in   string
		want Endpoint
	}{
		{"mqtt://h", mqtt(SchemeMQTT, TransportTCP, "h", 1883, "", false, "")},
		{"mqtt://h/", mqtt(SchemeMQTT, TransportTCP, "h", 1883, "", false, "")},
		{"tcp://h:1", mqtt(SchemeMQTT, TransportTCP, "h", 1, "", false, "")},
		{"MQTTS://h", mqtt(SchemeMQTTS, TransportTLS, "h", 8883, "", true, "")},
		{"ssl://h", mqtt(SchemeMQTTS, TransportTLS, "h", 8883, "", true, "")},
		{"ws://h", mqtt(SchemeWS, TransportWS, "h", 8083, "/mqtt", false, "")},
		{"wss://h/x", mqtt(SchemeWSS, TransportWSS, "h", 8084, "/x", true, "")},
		{"quic://[::1]:0", mqtt(SchemeQUIC, TransportQUIC, "::1", 0, "", true, "mqtt")},
		{"quic://:14567", mqtt(SchemeQUIC, TransportQUIC, "", 14567, "", true, "mqtt")},
		{"coap://h/sensors/1", Endpoint{Scheme: SchemeCoAP, Protocol: ProtocolCoAP, Transport: TransportUDP, Host: "h", Port: 5683, Path: "/sensors/1"}},
		{"coaps://h", Endpoint{Scheme: SchemeCoAPS, Protocol: ProtocolCoAP, Transport: TransportDTLS, Host: "h", Port: 5684, TLS: true}},
		{"coap+tcp://h:1", Endpoint{Scheme: SchemeCoAPTCP, Protocol: ProtocolCoAP, Transport: TransportTCP, Host: "h", Port: 1}},
		{"coaps+tcp://h", Endpoint{Scheme: SchemeCoAPSTCP, Protocol: ProtocolCoAP, Transport: TransportTLS, Host: "h", Port: 5684, TLS: true, ALPN: "coap"}},
		{"coap+quic://h", Endpoint{Scheme: SchemeCoAPQUIC, Protocol: ProtocolCoAP, Transport: TransportQUIC, Host: "h", Port: 5685, TLS: true, ALPN: ALPNCoAPQUIC}},
		{"amqp://h/q?x=1", Endpoint{Scheme: SchemeAMQP, Protocol: ProtocolAMQP, Transport: TransportTCP, Host: "h", Port: 5672, Path: "/q", RawQuery: "x=1"}},
		{"amqps://h", Endpoint{Scheme: SchemeAMQPS, Protocol: ProtocolAMQP, Transport: TransportTLS, Host: "h", Port: 5671, TLS: true}},
		{"amqp+quic://h", Endpoint{Scheme: SchemeAMQPQUIC, Protocol: ProtocolAMQP, Transport: TransportQUIC, Host: "h", Port: 5673, TLS: true, ALPN: "amqp"}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		// The canonical form parses to the same endpoint.
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in   string
		kind error
		hint string
	}{
		{"127.0.0.1:1883", ErrNoScheme, "mqtt://127.0.0.1:1883"},
		{"localhost:1883", ErrNoScheme, "SCHEME://HOST"},
		{"broker", ErrNoScheme, "SCHEME://HOST"},
		{"mqtt:h", ErrNoScheme, "SCHEME://HOST"},
		{"://h", ErrNoScheme, "SCHEME://HOST"},
		{"http://h", ErrUnknownScheme, "mqtt, mqtts"},
		{"mqtt://h:99999", ErrBadPort, "0-65535"},
		{"mqtt://h:", ErrBadPort, "1883"},
		{"mqtt://a b", ErrMalformed, "SCHEME://HOST"},
		{"mqtt://h!x", ErrBadHost, "DNS name"},
		{"mqtt://h/topic", ErrPath, "remove it"},
		{"mqtt://u:p@h", ErrMalformed, "--username"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		var pe *Error
		if !errors.Is(err, c.kind) || !errors.As(err, &pe) || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("Parse(%q) error %v, want %v with hint %q", c.in, err, c.kind, c.hint)
		}
		if err != nil && strings.Contains(err.Error(), "first path segment") {
			t.Errorf("Parse(%q): Go's raw parse error leaks: %v", c.in, err)
		}
	}
}

func TestSchemeTable(t *testing.T) {
	seen := map[Scheme]bool{}
	for _, r := range Schemes() {
		if seen[r.Scheme] {
			t.Errorf("scheme %s listed twice", r.Scheme)
		}
		seen[r.Scheme] = true
		if r.Protocol == "" || r.Transport == "" || r.DefaultPort == 0 {
			t.Errorf("row %+v: protocol, transport and default port are required", r)
		}
		if r.Transport == TransportQUIC && (r.ALPN == "" || !r.TLS) {
			t.Errorf("row %s: QUIC needs TLS and an ALPN", r.Scheme)
		}
		if got, ok := Lookup(strings.ToUpper(string(r.Scheme))); !ok || got != r {
			t.Errorf("Lookup(%s) = %+v, %v", r.Scheme, got, ok)
		}
	}
	for a, s := range aliases() {
		if !seen[s] {
			t.Errorf("alias %s points to unknown scheme %s", a, s)
		}
	}
}

// TestREADMETable: the README's URL table lists every row of the scheme
// table with its default port, so the documentation cannot drift.
func TestREADMETable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Schemes() {
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(string(r.Scheme)) + "://[^|]*\\|[^|]*\\| " + strconv.Itoa(r.DefaultPort) + "\\b")
		if !row.Match(b) {
			t.Errorf("README.md's URL table lacks a row for %s:// with default port %d", r.Scheme, r.DefaultPort)
		}
	}
}
