package lab

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/records"
)

// TestNodeArgsArgv: the typed command lines write what the lab's
// hand-assembled ones wrote (each want below is the former command line
// of that pattern, flag for flag and in order), and leave out exactly the
// optional flags that are zero. cmd/iotq's TestLabArgvParses checks that
// iotq takes them.
func TestNodeArgsArgv(t *testing.T) {
	pub := PubArgs{URL: "quic://10.0.0.1:14567", CA: "/c/ca.pem", Topic: "lab/1/m", QoS: 1, Size: 100, Count: 6,
		Interval: 5 * time.Millisecond, Records: "/r/pub.csv", Stats: "json", ClientID: "lab-pub-1", Timeout: 30 * time.Second}
	const pubBase = "pub --url quic://10.0.0.1:14567 --ca /c/ca.pem -t lab/1/m -q 1 --size 100 -n 6 --interval 5ms " +
		"--records /r/pub.csv --stats json --client-id lab-pub-1 --timeout 30s"
	periodic := pub
	periodic.QUIC = QUICClientArgs{Strategy: "per-topic", Datagrams: true}
	periodic.Reconnect, periodic.Persistent, periodic.SessionCache = true, true, "/r/session-cache"
	resume := pub
	resume.SessionCache, resume.Early = "/r/session-cache", true
	gated, closed, multi := pub, pub, pub
	gated.Gate = "stdin"
	closed.ClosedLoop = true
	multi.MultiTopic = PubTopicsArgs{Topics: 10, LargeSize: 65536, LargeInterval: 2 * time.Second}

	sub := SubArgs{URL: "mqtt://10.0.0.1:1883", CA: "/c/ca.pem", Topic: "lab/1/m", QoS: 1, Count: 6, Timeout: 41 * time.Second,
		ConnectTimeout: 30 * time.Second, Records: "/r/sub.csv", Stats: "json", Quiet: true, ReadyFile: "/r/sub.ready", ClientID: "lab-sub-1"}
	const subBase = "sub --url mqtt://10.0.0.1:1883 --ca /c/ca.pem -t lab/1/m -q 1 -n 6 --timeout 41s --connect-timeout 30s " +
		"--records /r/sub.csv --stats json --quiet --ready-file /r/sub.ready --client-id lab-sub-1"
	relay, echo := sub, sub
	relay.QUIC, relay.Notify = QUICClientArgs{Datagrams: true}, "stdout"
	echo.Echo = "lab/1/echo"

	for _, c := range []struct {
		got  interface{ Argv() []string }
		want string
	}{
		{pub, pubBase},
		{periodic, pubBase + " --quic-stream-strategy per-topic --quic-datagrams --reconnect --persistent --session-cache /r/session-cache"},
		{resume, pubBase + " --session-cache /r/session-cache --early"},
		{gated, pubBase + " --gate stdin"},
		{closed, pubBase + " --closed-loop"},
		{multi, pubBase + " --topics 10 --large-size 65536 --large-interval 2s"},
		{sub, subBase},
		{relay, subBase + " --quic-datagrams --notify stdout"},
		{echo, subBase + " --echo lab/1/echo"},
		{BrokerArgs{Listen: []string{"coap://0.0.0.0:5683", "mqtt://0.0.0.0:1883"}, QUIC0RTT: records.EarlyAccept, StateDir: "/c/bs",
			ReadyFile: "/c/b.json", LogFormat: "json"},
			"broker --listen coap://0.0.0.0:5683 --listen mqtt://0.0.0.0:1883 --quic-0rtt=accept --state-dir /c/bs --ready-file /c/b.json --log-format json"},
		{GatewayArgs{StateDir: "/c/gs", Routes: []string{"quic://0.0.0.0:5673?alpn=amqp=tcp://127.0.0.1:5672"}, ReadyFile: "/c/g.json",
			LogFormat: "json", LogLevel: "warn"},
			"gateway --state-dir /c/gs --route quic://0.0.0.0:5673?alpn=amqp=tcp://127.0.0.1:5672 --ready-file /c/g.json --log-format json --log-level warn"},
		{GatewayArgs{StateDir: "/c/gs", Routes: []string{"quic://0.0.0.0:4000?alpn=mqtt=tcp://127.0.0.1:1883"}, TLSCert: "/c/cert.pem",
			TLSKey: "/c/key.pem", TLSTicketKeys: "/c/t.keys", ReadyFile: "/c/g.json", LogFormat: "json", LogLevel: "info"},
			"gateway --state-dir /c/gs --route quic://0.0.0.0:4000?alpn=mqtt=tcp://127.0.0.1:1883 --tls-cert /c/cert.pem --tls-key /c/key.pem " +
				"--tls-ticket-keys /c/t.keys --ready-file /c/g.json --log-format json --log-level info"},
		{ProbeArgs{Every: 10 * time.Millisecond}, "lab probe --every 10ms"},
	} {
		if got := strings.Join(c.got.Argv(), " "); got != c.want {
			t.Errorf("%T argv\n%s\nwant\n%s", c.got, got, c.want)
		}
	}

	// Zero values: the flags the lab always gives stay (iotq's defaults
	// for -n and the timeouts are not zero); the optional ones go.
	for _, c := range []struct {
		got  []string
		want []string
	}{
		{PubArgs{}.Argv(), []string{"pub", "--url", "", "-t", "", "-q", "0", "--size", "0", "-n", "0", "--interval", "0s", "--timeout", "0s"}},
		{SubArgs{}.Argv(), []string{"sub", "--url", "", "-t", "", "-q", "0", "-n", "0", "--timeout", "0s", "--connect-timeout", "0s"}},
		{BrokerArgs{}.Argv(), []string{"broker"}},
		{GatewayArgs{}.Argv(), []string{"gateway"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("zero value argv %q, want %q", c.got, c.want)
		}
	}
}
