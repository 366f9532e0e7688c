package lab

import (
	"strconv"
	"time"

	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// The command lines of the iotq child processes the lab starts, one type
// per subcommand, so a flag the lab passes is written in one place and
// cmd/iotq's TestLabArgvParses parses every one with the command's real
// flag set: a flag renamed there fails that test instead of a campaign.
//
// Argv writes the flags in a fixed order. Flags the lab always gives (the
// broker URL, topic, counts, intervals, timeouts) are written even when
// zero, since iotq's default is not always zero (pub -n is 1, sub
// --connect-timeout 30s); the others are left out when zero, which is
// iotq's default for each of them.

// QUICClientArgs are pub's and sub's MQTT-over-QUIC choices.
type QUICClientArgs struct {
	// Strategy is --quic-stream-strategy; "" leaves iotq's default
	// (control), so cells that do not sweep it run their old command line.
	Strategy  string
	Datagrams bool // --quic-datagrams
}

func (q QUICClientArgs) argv() []string {
	var a []string
	if q.Strategy != "" {
		a = append(a, "--quic-stream-strategy", q.Strategy)
	}
	if q.Datagrams {
		a = append(a, "--quic-datagrams")
	}
	return a
}

// PubTopicsArgs are pub's multi-topic flags (E9); Topics 0 writes none.
type PubTopicsArgs struct {
	Topics        int           // --topics
	LargeSize     int           // --large-size
	LargeInterval time.Duration // --large-interval
}

func (p PubTopicsArgs) argv() []string {
	var a []string
	if p.Topics != 0 {
		a = append(a, "--topics", strconv.Itoa(p.Topics))
	}
	if p.LargeSize != 0 {
		a = append(a, "--large-size", strconv.Itoa(p.LargeSize))
	}
	if p.LargeInterval != 0 {
		a = append(a, "--large-interval", p.LargeInterval.String())
	}
	return a
}

// PubArgs is the command line of `iotq pub`.
type PubArgs struct {
	URL      string        // --url, always written
	CA       string        // --ca
	Topic    string        // -t, always written
	QoS      int           // -q, always written
	Size     int           // --size, always written
	Count    int           // -n, always written
	Interval time.Duration // --interval, always written
	Records  string        // --records
	Stats    string        // --stats
	ClientID string        // --client-id
	Timeout  time.Duration // --timeout, always written
	QUIC     QUICClientArgs

	Reconnect    bool   // --reconnect
	Persistent   bool   // --persistent
	SessionCache string // --session-cache
	Early        bool   // --early
	ClosedLoop   bool   // --closed-loop
	Gate         string // --gate
	MultiTopic   PubTopicsArgs
}

// Argv returns the arguments after the iotq binary, "pub" first.
func (p PubArgs) Argv() []string {
	a := []string{"pub", "--url", p.URL}
	a = appendString(a, "--ca", p.CA)
	a = append(a, "-t", p.Topic, "-q", strconv.Itoa(p.QoS), "--size", strconv.Itoa(p.Size),
		"-n", strconv.Itoa(p.Count), "--interval", p.Interval.String())
	a = appendString(a, "--records", p.Records)
	a = appendString(a, "--stats", p.Stats)
	a = appendString(a, "--client-id", p.ClientID)
	a = append(a, "--timeout", p.Timeout.String())
	a = append(a, p.QUIC.argv()...)
	a = appendBool(a, "--reconnect", p.Reconnect)
	a = appendBool(a, "--persistent", p.Persistent)
	a = appendString(a, "--session-cache", p.SessionCache)
	a = appendBool(a, "--early", p.Early)
	a = appendBool(a, "--closed-loop", p.ClosedLoop)
	a = appendString(a, "--gate", p.Gate)
	return append(a, p.MultiTopic.argv()...)
}

// SubArgs is the command line of `iotq sub`.
type SubArgs struct {
	URL            string        // --url, always written
	CA             string        // --ca
	Topic          string        // -t, always written
	QoS            int           // -q, always written
	Count          int           // -n, always written (0: no limit)
	Timeout        time.Duration // --timeout, always written (0: never)
	ConnectTimeout time.Duration // --connect-timeout, always written
	Records        string        // --records
	Stats          string        // --stats
	Quiet          bool          // --quiet
	ReadyFile      string        // --ready-file
	ClientID       string        // --client-id
	QUIC           QUICClientArgs
	Notify         string // --notify
	Echo           string // --echo
}

// Argv returns the arguments after the iotq binary, "sub" first.
func (s SubArgs) Argv() []string {
	a := []string{"sub", "--url", s.URL}
	a = appendString(a, "--ca", s.CA)
	a = append(a, "-t", s.Topic, "-q", strconv.Itoa(s.QoS), "-n", strconv.Itoa(s.Count),
		"--timeout", s.Timeout.String(), "--connect-timeout", s.ConnectTimeout.String())
	a = appendString(a, "--records", s.Records)
	a = appendString(a, "--stats", s.Stats)
	a = appendBool(a, "--quiet", s.Quiet)
	a = appendString(a, "--ready-file", s.ReadyFile)
	a = appendString(a, "--client-id", s.ClientID)
	a = append(a, s.QUIC.argv()...)
	a = appendString(a, "--notify", s.Notify)
	return appendString(a, "--echo", s.Echo)
}

// BrokerArgs is the command line of `iotq broker`.
type BrokerArgs struct {
	Listen []string // --listen, one per URL
	// QUIC0RTT is --quic-0rtt, written as --quic-0rtt=VALUE: the flag
	// also takes true/false as a boolean flag does.
	QUIC0RTT  records.EarlyPolicy
	StateDir  string // --state-dir
	ReadyFile string // --ready-file
	LogFormat string // --log-format
	LogLevel  string // --log-level
}

// Argv returns the arguments after the iotq binary, "broker" first.
func (b BrokerArgs) Argv() []string {
	a := []string{"broker"}
	for _, l := range b.Listen {
		a = append(a, "--listen", l)
	}
	if b.QUIC0RTT != "" {
		a = append(a, "--quic-0rtt="+string(b.QUIC0RTT))
	}
	a = appendString(a, "--state-dir", b.StateDir)
	a = appendString(a, "--ready-file", b.ReadyFile)
	a = appendString(a, "--log-format", b.LogFormat)
	return appendString(a, "--log-level", b.LogLevel)
}

// GatewayArgs is the command line of `iotq gateway`.
type GatewayArgs struct {
	StateDir      string   // --state-dir
	Routes        []string // --route, one per route
	TLSCert       string   // --tls-cert
	TLSKey        string   // --tls-key
	TLSTicketKeys string   // --tls-ticket-keys
	ReadyFile     string   // --ready-file
	LogFormat     string   // --log-format
	LogLevel      string   // --log-level
}

// Argv returns the arguments after the iotq binary, "gateway" first.
func (g GatewayArgs) Argv() []string {
	a := appendString([]string{"gateway"}, "--state-dir", g.StateDir)
	for _, r := range g.Routes {
		a = append(a, "--route", r)
	}
	a = appendString(a, "--tls-cert", g.TLSCert)
	a = appendString(a, "--tls-key", g.TLSKey)
	a = appendString(a, "--tls-ticket-keys", g.TLSTicketKeys)
	a = appendString(a, "--ready-file", g.ReadyFile)
	a = appendString(a, "--log-format", g.LogFormat)
	return appendString(a, "--log-level", g.LogLevel)
}

// ProbeArgs is the command line of `iotq lab probe`, the timing guard's
// host probe (TimingGuard.ProbeCommand).
type ProbeArgs struct {
	Every time.Duration // --every, always written
}

// Argv returns the arguments after the iotq binary, "lab", "probe" first.
func (p ProbeArgs) Argv() []string {
	return []string{"lab", "probe", "--every", p.Every.String()}
}

func appendString(a []string, flag, v string) []string {
	if v == "" {
		return a
	}
	return append(a, flag, v)
}

func appendBool(a []string, flag string, on bool) []string {
	if !on {
		return a
	}
	return append(a, flag)
}

// quicClientArgs are the cell's QUIC stream strategy and datagram choice
// as pub's and sub's flags: none for the default (control, no datagrams)
// or another transport.
func quicClientArgs(c Cell) QUICClientArgs {
	if c.Transport != TransportQUIC {
		return QUICClientArgs{}
	}
	strategy, dg := quicStreamsOf(c)
	if strategy == transport.StrategyControl {
		strategy = ""
	}
	return QUICClientArgs{Strategy: strategy, Datagrams: dg}
}
