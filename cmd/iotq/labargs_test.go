package main

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/lab"
	"github.com/iotq/iotq/records"
)

// TestLabArgvParses: the command lines the lab gives its child processes
// (lab.PubArgs, SubArgs, BrokerArgs, GatewayArgs, ProbeArgs) parse with the
// real flag set of their command, and each field reaches the flag it names.
// A flag renamed or removed here, or a value written in a form the flag
// does not read (a duration without its unit), fails this test instead of
// a lab campaign at run time.
func TestLabArgvParses(t *testing.T) {
	cases := []struct {
		name string
		args interface{ Argv() []string }
		full bool              // every field set (checked), so a new field must be added here
		want map[string]string // every flag given, with its parsed value
	}{
		{"pub", lab.PubArgs{URL: "quic://10.0.0.1:14567", CA: "/c/ca.pem", Topic: "lab/1/m", QoS: 1, Size: 100, Count: 6,
			Interval: 5 * time.Millisecond, Records: "/r/pub.csv", Stats: "json", ClientID: "lab-pub-1", Timeout: 30200 * time.Millisecond,
			QUIC:      lab.QUICClientArgs{Strategy: "per-topic", Datagrams: true},
			Reconnect: true, Persistent: true, SessionCache: "/r/session-cache", Early: true, ClosedLoop: true, Gate: "stdin",
			MultiTopic: lab.PubTopicsArgs{Topics: 10, LargeSize: 65536, LargeInterval: 2 * time.Second}},
			true, map[string]string{"url": "quic://10.0.0.1:14567", "ca": "/c/ca.pem", "t": "lab/1/m", "q": "1", "size": "100", "n": "6",
				"interval": "5ms", "records": "/r/pub.csv", "stats": "json", "client-id": "lab-pub-1", "timeout": "30.2s",
				"quic-stream-strategy": "per-topic", "quic-datagrams": "true", "reconnect": "true", "persistent": "true",
				"session-cache": "/r/session-cache", "early": "true", "closed-loop": "true", "gate": "stdin",
				"topics": "10", "large-size": "65536", "large-interval": "2s"}},
		// a batch publisher: zero interval, the flags the lab always gives
		{"pub minimal", lab.PubArgs{URL: "mqtt://127.0.0.1:1883", Topic: "lab/1/m", Count: 1, Timeout: time.Second}, false,
			map[string]string{"url": "mqtt://127.0.0.1:1883", "t": "lab/1/m", "q": "0", "size": "0", "n": "1", "interval": "0s", "timeout": "1s"}},
		{"sub", lab.SubArgs{URL: "mqtts://10.0.0.1:8883", CA: "/c/ca.pem", Topic: "lab/1/m/#", QoS: 2, Count: 6, Timeout: 41 * time.Second,
			ConnectTimeout: 30 * time.Second, Records: "/r/sub.csv", Stats: "json", Quiet: true, ReadyFile: "/r/sub.ready",
			ClientID: "lab-sub-1", QUIC: lab.QUICClientArgs{Strategy: "per-publish", Datagrams: true}, Notify: "stdout", Echo: "lab/1/echo"},
			true, map[string]string{"url": "mqtts://10.0.0.1:8883", "ca": "/c/ca.pem", "t": "lab/1/m/#", "q": "2", "n": "6", "timeout": "41s",
				"connect-timeout": "30s", "records": "/r/sub.csv", "stats": "json", "quiet": "true", "ready-file": "/r/sub.ready",
				"client-id": "lab-sub-1", "quic-stream-strategy": "per-publish", "quic-datagrams": "true", "notify": "stdout", "echo": "lab/1/echo"}},
		// E10's and E11's subscriber: no count, no idle timeout
		{"sub unbounded", lab.SubArgs{URL: "mqtt://10.0.0.1:1883", Topic: "lab/1/m/#", ConnectTimeout: 30 * time.Second}, false,
			map[string]string{"url": "mqtt://10.0.0.1:1883", "t": "lab/1/m/#", "q": "0", "n": "0", "timeout": "0s", "connect-timeout": "30s"}},
		{"broker", lab.BrokerArgs{Listen: []string{"coap://0.0.0.0:5683", "mqtt://0.0.0.0:1883"}, QUIC0RTT: records.EarlyAccept,
			StateDir: "/c/broker-state", ReadyFile: "/c/broker.ready.json", LogFormat: "json", LogLevel: "warn"},
			true, map[string]string{"listen": "coap://0.0.0.0:5683,mqtt://0.0.0.0:1883", "quic-0rtt": "accept", "state-dir": "/c/broker-state",
				"ready-file": "/c/broker.ready.json", "log-format": "json", "log-level": "warn"}},
		{"gateway", lab.GatewayArgs{StateDir: "/c/gateway-state", Routes: []string{"quic://0.0.0.0:5673?alpn=amqp&early_data=accept=tcp://127.0.0.1:5672"},
			TLSCert: "/c/cert.pem", TLSKey: "/c/key.pem", TLSTicketKeys: "/c/ticket.keys", ReadyFile: "/c/gateway.ready.json", LogFormat: "json", LogLevel: "info"},
			true, map[string]string{"state-dir": "/c/gateway-state", "route": "quic://0.0.0.0:5673?alpn=amqp&early_data=accept=tcp://127.0.0.1:5672",
				"tls-cert": "/c/cert.pem", "tls-key": "/c/key.pem", "tls-ticket-keys": "/c/ticket.keys", "ready-file": "/c/gateway.ready.json",
				"log-format": "json", "log-level": "info"}},
		{"lab probe", lab.ProbeArgs{Every: 10 * time.Millisecond}, true, map[string]string{"every": "10ms"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.full {
				for _, f := range zeroFields(reflect.ValueOf(c.args), "") {
					t.Errorf("field %s is not set: give every field a value so its flag is parsed", f)
				}
			}
			argv := c.args.Argv()
			fs := labChildFlags(t, argv)
			if err := fs.Parse(argv[len(strings.Fields(fs.Name())):]); err != nil {
				t.Fatalf("iotq %s does not take the lab's command line %q: %v", fs.Name(), argv, explainFlagError(fs, err))
			}
			if fs.NArg() > 0 {
				t.Fatalf("iotq %s: arguments %q left after the flags of %q", fs.Name(), fs.Args(), argv)
			}
			got := map[string]string{}
			fs.Visit(func(f *flag.Flag) { got[f.Name] = f.Value.String() })
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("iotq %s parsed %q as\n%v\nwant\n%v", fs.Name(), argv, got, c.want)
			}
		})
	}
}

// TestLabArgvCatchesBadFlags: the parse above fails for a flag the
// command lacks and for a duration written without its unit, the two ways
// a lab command line goes stale.
func TestLabArgvCatchesBadFlags(t *testing.T) {
	for _, argv := range [][]string{
		{"pub", "--url", "mqtt://127.0.0.1:1883", "--no-such-flag", "x"},
		{"sub", "--url", "mqtt://127.0.0.1:1883", "--timeout", "2"},
		{"lab", "probe", "--every", "10"},
	} {
		fs := labChildFlags(t, argv)
		if err := fs.Parse(argv[len(strings.Fields(fs.Name())):]); err == nil {
			t.Errorf("iotq %s took %q", fs.Name(), argv)
		}
	}
}

// labChildFlags returns a fresh flag set of the command argv runs.
func labChildFlags(t *testing.T, argv []string) *flag.FlagSet {
	t.Helper()
	if len(argv) >= 2 && argv[0] == "lab" && argv[1] == "probe" {
		fs, _ := newLabProbeFlags()
		return fs
	}
	if len(argv) == 0 {
		t.Fatal("empty command line")
	}
	c := newApp(io.Discard, io.Discard).lookup(argv[0])
	if c == nil || c.Flags == nil {
		t.Fatalf("iotq has no command %q with flags", argv[0])
	}
	return c.Flags
}

// zeroFields returns the paths of v's fields (nested structs included)
// that hold their zero value.
func zeroFields(v reflect.Value, path string) []string {
	var out []string
	for i := range v.NumField() {
		f, p := v.Field(i), path+v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.Struct:
			out = append(out, zeroFields(f, p+".")...)
		case f.IsZero():
			out = append(out, p)
		}
	}
	return out
}
