package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// clientFlags are the connection flags shared by pub and sub.
type clientFlags struct {
	url          string
	clientID     string
	username     string
	password     string
	ca           string
	insecure     bool
	sessionCache string
	protocol     int
	qos          int
	keepAlive    time.Duration
	persistent   bool
	no0RTT       bool
	handshake    time.Duration
	quicStrategy string // --quic-stream-strategy, checked by check
	quicDgrams   bool
	stats        string
	records      string

	host string // -h, mosquitto_pub/sub's: replaces the host of --url
	port int    // -p, mosquitto_pub/sub's: replaces the port of --url

	ep client.Endpoint // --url, parsed once by check
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "mqtt://127.0.0.1:1883", "broker `URL`: mqtt://, mqtts://, ws://, wss://, quic://, coap://, coaps://, coap+tcp://, coaps+tcp://, coap+quic://, amqp://, amqps:// or amqp+quic://HOST[:PORT] (README: URLs)")
	fs.StringVar(&f.clientID, "client-id", "", "MQTT client `ID` (default iotq- plus 12 random hex digits)")
	fs.StringVar(&f.username, "username", "", "user `name` for the broker")
	fs.StringVar(&f.password, "password", "", "`password` for the broker")
	fs.StringVar(&f.ca, "ca", "", "PEM `FILE` with the CA of the broker's certificate (mqtts, wss, quic; default system roots)")
	fs.BoolVar(&f.insecure, "insecure", false, "do not verify the broker's certificate (tests only)")
	fs.StringVar(&f.sessionCache, "session-cache", "", "`FILE` that keeps TLS/QUIC session tickets across runs (resumption, QUIC 0-RTT)")
	fs.IntVar(&f.protocol, "protocol", 3, "MQTT `version`: 3 (3.1.1) or 5")
	fs.IntVar(&f.qos, "q", 0, "`QoS` 0, 1 or 2")
	fs.DurationVar(&f.keepAlive, "keepalive", 60*time.Second, "MQTT keep-alive `interval`")
	fs.BoolVar(&f.persistent, "persistent", false, "ask the broker to keep the session after disconnect (clean session/clean start off)")
	fs.BoolVar(&f.no0RTT, "no-0rtt", false, "QUIC: never send early data (still resume from --session-cache)")
	fs.DurationVar(&f.handshake, "quic-handshake-timeout", 0, "QUIC handshake idle `timeout` (default transport's 20s)")
	fs.StringVar(&f.quicStrategy, "quic-stream-strategy", transport.StrategyControl, "MQTT over QUIC: `strategy` for PUBLISH packets: control (one stream), per-topic (a stream per topic) or per-publish (a stream per message) (docs/mqtt-quic.md)")
	fs.BoolVar(&f.quicDgrams, "quic-datagrams", false, "MQTT over QUIC: send and receive QoS 0 messages as QUIC datagrams where the broker supports them (docs/mqtt-quic.md)")
	fs.StringVar(&f.stats, "stats", "", "print statistics at the end: json")
	fs.StringVar(&f.records, "records", "", "write one CSV row per message to `FILE` (columns in docs/records.md)")

	// mosquitto_pub/sub's short flags, with their meaning (docs/cli.md).
	fs.StringVar(&f.host, "h", "", "broker `host` (as mosquitto's -h: replaces the host of --url; --help for help)")
	fs.IntVar(&f.port, "p", 0, "broker `port` (as mosquitto's -p: replaces the port of --url)")
	fs.StringVar(&f.clientID, "i", "", "same as --client-id")
	fs.StringVar(&f.username, "u", "", "same as --username")
	fs.StringVar(&f.password, "P", "", "same as --password")
	fs.Func("k", "keep-alive in `seconds` (as mosquitto's -k; same as --keepalive Ns)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("want whole seconds from 1 to 65535 (or --keepalive 30s)")
		}
		f.keepAlive = time.Duration(n) * time.Second
		return nil
	})
}

// check reports the first usage problem of the shared flags.
func (f *clientFlags) check() error {
	if f.protocol != 3 && f.protocol != 4 && f.protocol != 5 {
		return usageErrorf("--protocol %d: want 3 (MQTT 3.1.1) or 5", f.protocol)
	}
	if f.qos < 0 || f.qos > 2 {
		return usageErrorf("-q %d: want 0, 1 or 2", f.qos)
	}
	if f.stats != "" && f.stats != "json" {
		return usageErrorf("--stats %q: want json", f.stats)
	}
	if f.keepAlive < time.Second || f.keepAlive > 65535*time.Second {
		return usageErrorf("--keepalive %s: want 1s to 18h", f.keepAlive)
	}
	if f.host != "" || f.port != 0 {
		u, err := withHostPort(f.url, f.host, f.port)
		if err != nil {
			return err
		}
		f.url = u
	}
	ep, err := client.ParseURL(f.url)
	if err != nil {
		return usageErrorf("--url: %v", err)
	}
	if ep.Protocol == endpoint.ProtocolCoAP && strings.Trim(ep.Path, "/") != "" {
		// The client maps -t to /t/TOPIC and would ignore the path: a
		// topic written into the URL (coap://HOST/TOPIC) must not be
		// dropped silently.
		topic := strings.TrimPrefix(strings.Trim(ep.Path, "/"), "t/")
		return usageErrorf("--url %s: a CoAP URL names the server only; give the topic with -t (--url %s://%s -t %s uses the resource /t/%s)",
			f.url, ep.Scheme, ep.Address(), topic, topic)
	}
	f.ep = ep
	strategy, err := transport.ParseStrategy(f.quicStrategy)
	if err != nil {
		return usageErrorf("--quic-stream-strategy: %v", err)
	}
	f.quicStrategy = strategy
	if (strategy != transport.StrategyControl || f.quicDgrams) &&
		(ep.Transport != endpoint.TransportQUIC || ep.Protocol != endpoint.ProtocolMQTT) {
		return usageErrorf("--quic-stream-strategy %s / --quic-datagrams: for MQTT over QUIC only (quic://), not %s", strategy, ep.Scheme)
	}
	return nil
}

// withHostPort returns rawURL with its host and/or port replaced (-h, -p).
func withHostPort(rawURL, host string, port int) (string, error) {
	if port < 0 || port > 65535 {
		return "", usageErrorf("-p %d: want a port from 1 to 65535", port)
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "", usageErrorf("--url %q: want SCHEME://HOST[:PORT] for -h/-p to apply to", rawURL)
	}
	h, p := u.Hostname(), u.Port()
	if host != "" {
		h = host
	}
	if port != 0 {
		p = strconv.Itoa(port)
	}
	u.Host = h
	if p != "" {
		u.Host = net.JoinHostPort(h, p)
	} else if strings.Contains(h, ":") {
		u.Host = "[" + h + "]"
	}
	return u.String(), nil
}

func (f *clientFlags) options(connectTimeout time.Duration, early *client.EarlyMessage) client.Options {
	return client.Options{
		Early:             early,
		ClientID:          f.clientID,
		Username:          f.username,
		Password:          f.password,
		PersistentSession: f.persistent,
		KeepAlive:         f.keepAlive,
		ProtocolVersion:   f.protocol,
		CAFile:            f.ca,
		Insecure:          f.insecure,
		SessionCacheFile:  f.sessionCache,
		QUIC: transport.QUICOptions{Disable0RTT: f.no0RTT, HandshakeIdleTimeout: f.handshake,
			ClientStreams: transport.QUICClientStreams{Strategy: f.quicStrategy, Datagrams: f.quicDgrams}},
		ConnectTimeout: connectTimeout,
	}
}

// connectionStats are the connection facts of --stats json.
func connectionStats(info client.ConnectionInfo, dialDur time.Duration) records.ConnectionStats {
	cs := records.ConnectionStats{
		URL: info.URL, Transport: info.Transport, Protocol: info.Protocol, ClientID: info.ClientID,
		Used0RTT: info.Used0RTT, TLSResumed: info.TLSResumed, Rejected0RTT: info.Rejected0RTT,
		DialStartNs:      records.UnixNs(info.DialStart),
		TransportReadyNs: records.UnixNs(info.TransportReady),
		ConnackNs:        records.UnixNs(info.Connack),
		DialMs:           float64(dialDur.Nanoseconds()) / 1e6,
		TransportReadyMs: records.MsBetween(info.DialStart, info.TransportReady),
		ConnackMs:        records.MsBetween(info.DialStart, info.Connack),
		EarlySentNs:      records.UnixNs(info.EarlySent),
	}
	if info.QUIC != nil {
		cs.QUIC = info.QUIC
	}
	// Only the facts the protocol has: a CoAP client has no client id on
	// the wire, and only MQTT's CONNACK says whether a session was present.
	proto, _, _ := strings.Cut(info.Protocol, "/") // "mqtt/5", "amqp/1.0", "coap"
	switch endpoint.Protocol(proto) {
	case endpoint.ProtocolCoAP:
		cs.ClientID = ""
	case endpoint.ProtocolMQTT:
		sp := info.SessionPresent
		cs.SessionPresent = &sp
		if info.QUIC != nil { // MQTT over QUIC: name the stream strategy
			cs.QUICStreamStrategy = info.QUIC.StreamStrategy
			if cs.QUICStreamStrategy == "" {
				cs.QUICStreamStrategy = transport.StrategyControl
			}
			cs.QUICDatagrams = info.QUIC.Datagrams
		}
	}
	return cs
}

// connect dials and turns failures into a message that says what to check.
func connect(ctx context.Context, f *clientFlags, timeout time.Duration, early *client.EarlyMessage) (client.Client, time.Duration, error) {
	start := time.Now()
	c, err := client.DialEndpoint(ctx, f.ep, f.options(timeout, early))
	if err != nil {
		return nil, 0, &exitError{code: exitFailure, msg: err.Error()}
	}
	return c, time.Since(start), nil
}

// printStats writes the --stats json object as one line.
func printStats(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

// createRecords creates the --records file of pub or sub.
func createRecords[T any](path string) (*records.Writer[T], error) {
	w, err := records.Create[T](path)
	if err != nil {
		return nil, fmt.Errorf("records: %w (check the --records path)", err)
	}
	return w, nil
}
