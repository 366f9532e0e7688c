package broker

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfigGood(t *testing.T) {
	o, err := ParseConfig("good.yaml", []byte(`
listen:
  - mqtt://0.0.0.0:1883
  - quic://:14567
state_dir: /var/lib/iotq
quic:
  allow_0rtt: false
  handshake_timeout: 45s
auth:
  allow_anonymous: false
flow:
  slow_consumer: disconnect
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Listen) != 2 || o.StateDir != "/var/lib/iotq" || *o.QUIC.Allow0RTT || o.QUIC.HandshakeTimeout != 45*time.Second ||
		*o.Auth.AllowAnonymous || o.Flow.SlowConsumer != PolicyDisconnect {
		t.Fatalf("parsed %+v", o)
	}
}

func TestParseConfigReportsEveryProblemWithKeyAndLine(t *testing.T) {
	_, err := ParseConfig("bad.yaml", []byte(`listen:
  - mqtt://:1883
  - gopher://x
quic:
  idle_timeout: soon
  colour: blue
flow:
  queue_length: lots
log:
  level: loud
`))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"bad.yaml:3: listen[1]: ",
		"unknown scheme",
		"bad.yaml:5: quic.idle_timeout: got \"soon\"; expected a duration",
		"bad.yaml:6: quic.colour: unknown key; expected one of: early_data, allow_0rtt, handshake_timeout, idle_timeout",
		"bad.yaml:8: flow.queue_length: got \"lots\"; expected a whole number",
		"bad.yaml:10: log.level: want debug, info, warn or error",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestParseConfigNotAMapping(t *testing.T) {
	_, err := ParseConfig("list.yaml", []byte("- a\n- b\n"))
	if err == nil || !strings.Contains(err.Error(), "list.yaml:1: the configuration must be a mapping") {
		t.Fatalf("err = %v", err)
	}
	_, err = ParseConfig("syntax.yaml", []byte("listen: [a\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "syntax.yaml:") {
		t.Fatalf("err = %v", err)
	}
}

func TestPrintConfigRoundTrips(t *testing.T) {
	o := Options{Listen: []string{"quic://:0"}, StateDir: "/s"}.WithDefaults()
	b, err := MarshalConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig("printed.yaml", b)
	if err != nil {
		t.Fatalf("printed config does not parse: %v\n%s", err, b)
	}
	b2, _ := MarshalConfig(back.WithDefaults())
	if string(b) != string(b2) {
		t.Fatalf("round trip changed:\n%s\n---\n%s", b, b2)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen: [mqtt://:1883]\nquic: {idle_timeout: 3s}\n"))
	f.Add([]byte("flow:\n  queue_length: -1\n"))
	f.Add([]byte("- x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseConfig("fuzz.yaml", b)
		if err == nil {
			if verr := o.Validate(); verr != nil {
				t.Fatalf("accepted config fails Validate: %v", verr)
			}
		}
	})
}
