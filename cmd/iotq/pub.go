package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/payload"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
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
	stats        string
	records      string

	ep client.Endpoint // --url, parsed once by check
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "mqtt://127.0.0.1:1883", "broker `URL`: mqtt://, mqtts://, ws://, wss:// or quic://HOST[:PORT]")
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
	fs.StringVar(&f.stats, "stats", "", "print statistics at the end: json")
	fs.StringVar(&f.records, "records", "", "write one CSV row per message to `FILE` (columns in docs/records.md)")
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
	ep, err := client.ParseURL(f.url)
	if err != nil {
		return usageErrorf("--url: %v", err)
	}
	f.ep = ep
	return nil
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
		QUIC:              transport.QUICOptions{Disable0RTT: f.no0RTT, HandshakeIdleTimeout: f.handshake},
		ConnectTimeout:    connectTimeout,
	}
}

// connectionStats are the connection facts of --stats json: dial_ms is
// the wall time of the whole connect call; transport_ready_ms and
// connack_ms count from dial_start.
func connectionStats(info client.ConnectionInfo, dialDur time.Duration) records.ConnectionStats {
	cs := records.ConnectionStats{
		URL: info.URL, Transport: info.Transport, Protocol: info.Protocol, ClientID: info.ClientID,
		Used0RTT: info.Used0RTT, TLSResumed: info.TLSResumed, Rejected0RTT: info.Rejected0RTT,
		SessionPresent:   info.SessionPresent,
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
	return cs
}

// printStats writes the --stats json object as one line.
func printStats(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
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

// createRecords creates the --records file of pub or sub.
func createRecords[T any](path string) (*records.Writer[T], error) {
	w, err := records.Create[T](path)
	if err != nil {
		return nil, fmt.Errorf("records: %w (check the --records path)", err)
	}
	return w, nil
}

func (a *app) pubCommand() *Command {
	c := &Command{
		Name:      "pub",
		UsageLine: "iotq pub --url URL -t TOPIC (-m MESSAGE | --size N) [flags]",
		Short:     "publish MQTT messages (measurement payloads with --size)",
		Long: `Pub connects to a broker and publishes -n messages on topic -t, in the
spirit of mosquitto_pub, over any transport of iotq (--url mqtt://, mqtts://,
ws://, wss://, quic://).

The message is -m MESSAGE, or with --size N a measurement payload: a 16-byte
header (magic, version, sequence number 0,1,2..., send time in Unix ns)
padded to N bytes, which iotq sub turns into one-way delays. The send time
is taken just before the message is handed to the MQTT library.

Messages leave every --interval (0: back to back), or with --gate stdin one
per line read from standard input (stop-and-wait: the lab feeds the lines
that iotq sub --notify stdout prints); end of input stops. --gate also takes
a file path.

Each publish returns a receipt: accepted when the broker acknowledged it
(PUBACK for QoS 1, PUBCOMP for QoS 2) or when it was handed to the transport
(QoS 0). --wait-acks (on by default) waits up to --timeout for all receipts
before disconnecting. --records FILE writes one CSV row per message:
seq,size,send_ns,accepted_ns,ok,error. --stats json prints one JSON object
with the connection facts (transport, protocol, used_0rtt, tls_resumed,
dial_start_ns, transport_ready_ns, connack_ns, dial_ms = duration of the
whole connect call, transport_ready_ms and connack_ms counted from
dial_start) and the counts sent, acked, failed.

--early sends message 0 in the same write as CONNECT, before the CONNACK
(QoS 0 only; MQTT lets a client send right after CONNECT). Over QUIC with a
ticket from --session-cache it rides in the 0-RTT flight, so it can arrive
half a round trip after the dial began; without --early the MQTT library
waits for CONNACK before the first PUBLISH. Its send time is taken before
the dial, and early_sent_ns in --stats tells when it was written.

--timeout bounds the connection attempt and the final wait for receipts
(default 30s). --protocol defaults to 3 (MQTT 3.1.1), which every broker
speaks; 5 selects MQTT 5.0.

Exit status: 0 when every message was accepted, 1 when the connection failed
or a message was not accepted, 2 on bad flags.`,
		Flags: newFlagSet("pub"),
	}
	fs := c.Flags
	var (
		cf       clientFlags
		topic    string
		message  string
		size     int
		retain   bool
		count    int
		interval time.Duration
		gate     string
		waitAcks bool
		timeout  time.Duration
		early    bool
	)
	cf.register(fs)
	fs.StringVar(&topic, "t", "", "`topic` to publish to (required)")
	fs.StringVar(&message, "m", "", "`message` to publish")
	fs.IntVar(&size, "size", 0, "publish measurement payloads of `N` bytes (at least 16)")
	fs.BoolVar(&retain, "r", false, "set the retain flag")
	fs.IntVar(&count, "n", 1, "number of messages to publish (with --gate: at most)")
	fs.DurationVar(&interval, "interval", 0, "time between messages (0: back to back)")
	fs.StringVar(&gate, "gate", "", "publish one message per line read from `SOURCE`: stdin or a file path")
	fs.BoolVar(&waitAcks, "wait-acks", true, "for QoS 1/2 wait for all acknowledgements before exiting")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "bound for connecting and for the final wait for acknowledgements")
	fs.BoolVar(&early, "early", false, "send the first message right behind CONNECT, before CONNACK (QoS 0 only; QUIC 0-RTT: in the first flight)")
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected arguments %q", args)
		}
		if err := cf.check(); err != nil {
			return err
		}
		switch {
		case topic == "":
			return usageErrorf("-t TOPIC is required")
		case strings.ContainsAny(topic, "+#"):
			return usageErrorf("-t %q: a topic to publish to must not contain + or #", topic)
		case message != "" && size > 0:
			return usageErrorf("give either -m MESSAGE or --size N, not both")
		case message == "" && size == 0:
			return usageErrorf("give -m MESSAGE or --size N (a measurement payload of N bytes)")
		case size < 0:
			return usageErrorf("--size %d: must be positive", size)
		case count < 1:
			return usageErrorf("-n %d: want at least 1", count)
		case early && cf.qos != 0:
			return usageErrorf("--early needs -q 0: the MQTT library cannot track an acknowledgement for a message sent before CONNACK")
		case interval < 0 || timeout <= 0:
			return usageErrorf("--interval must not be negative and --timeout must be positive")
		}
		if size > 0 {
			if err := payload.CheckSize(size); err != nil {
				return usageErrorf("--size: %v", err)
			}
		}
		var gateC <-chan struct{}
		if gate != "" {
			var r io.Reader = os.Stdin
			if gate != "stdin" && gate != "-" {
				f, err := os.Open(gate)
				if err != nil {
					return usageErrorf("--gate: %v", err)
				}
				defer f.Close()
				r = f
			}
			stopGate := make(chan struct{})
			defer close(stopGate)
			gateC = readLines(r, stopGate)
		}
		var recs *records.Writer[records.PubRecord]
		if cf.records != "" {
			var err error
			if recs, err = createRecords[records.PubRecord](cf.records); err != nil {
				return err
			}
		}
		p := &publisher{app: a, early: early, topic: topic, qos: byte(cf.qos), retain: retain, message: message, size: size, recs: recs, runID: payload.NewRunID()}
		runErr := p.run(ctx, &cf, count, interval, gateC, waitAcks, timeout)
		if err := recs.Close(); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	})
	return c
}

// publisher runs one pub invocation.
type publisher struct {
	app     *app
	early   bool
	topic   string
	qos     byte
	retain  bool
	message string
	size    int
	recs    *records.Writer[records.PubRecord]
	runID   uint64 // payload run id: tells this run's messages from another's

	mu             sync.Mutex
	sent, acked    int
	failed         int
	firstErr       error
	lastAcceptedNs int64
}

type pending struct {
	seq    uint32
	size   int
	sendNs int64
	r      *client.Receipt
	err    error // Publish itself failed
}

func (p *publisher) run(ctx context.Context, cf *clientFlags, count int, interval time.Duration, gate <-chan struct{}, waitAcks bool, timeout time.Duration) error {
	// --early: message 0 is built (and its send time taken) before the
	// dial, and leaves in the same write as CONNECT.
	var first *pending
	var earlyMsg *client.EarlyMessage
	if p.early {
		if gate != nil {
			select {
			case _, ok := <-gate:
				if !ok {
					return nil
				}
			case <-ctx.Done():
				return nil
			}
		}
		body := p.body()
		now := time.Now().UnixNano()
		if p.size > 0 {
			payload.Put(body, payload.Header{Seq: 0, SendNs: now, RunID: p.runID})
		}
		first = &pending{seq: 0, size: len(body), sendNs: now}
		earlyMsg = &client.EarlyMessage{Topic: p.topic, Payload: body, Retain: p.retain}
	}
	c, dialDur, err := connect(ctx, cf, timeout, earlyMsg)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()

	// The recorder writes rows in publish order as receipts complete.
	queue := make(chan pending, 1024)
	recDone := make(chan struct{})
	stopWait := make(chan struct{})
	go func() {
		defer close(recDone)
		for pe := range queue {
			p.finish(pe, stopWait)
		}
	}()

	var firstSendNs int64
	start := time.Now()
	i0 := 0
	if first != nil {
		r, complete := client.NewReceipt()
		if at := c.ConnectionInfo().EarlySent; !at.IsZero() {
			complete(at, nil)
		} else {
			complete(time.Now(), errors.New("early message not written"))
		}
		first.r = r
		firstSendNs = first.sendNs
		p.mu.Lock()
		p.sent++
		p.mu.Unlock()
		queue <- *first
		i0 = 1
		start = time.Unix(0, first.sendNs)
	}
loop:
	for i := i0; i < count; i++ {
		if gate != nil {
			select {
			case _, ok := <-gate:
				if !ok {
					break loop // end of input ends the run
				}
			case <-ctx.Done():
				break loop
			case <-c.Done():
				break loop
			}
		} else if interval > 0 && i > 0 {
			next := start.Add(time.Duration(i) * interval)
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					break loop
				case <-c.Done():
					t.Stop()
					break loop
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		body := p.body()
		pe := pending{seq: uint32(i), size: len(body)}
		// Send time: just before the library gets the message.
		now := time.Now().UnixNano()
		if p.size > 0 {
			payload.Put(body, payload.Header{Seq: pe.seq, SendNs: now, RunID: p.runID})
		}
		pe.sendNs = now
		pe.r, pe.err = c.Publish(ctx, p.topic, body, client.PublishOptions{QoS: p.qos, Retain: p.retain})
		if firstSendNs == 0 {
			firstSendNs = now
		}
		p.mu.Lock()
		p.sent++
		p.mu.Unlock()
		queue <- pe
		if pe.err != nil && errors.Is(pe.err, client.ErrConnectionLost) {
			break
		}
	}
	// Wait for the receipts (QoS 1/2, bounded by --timeout), then disconnect.
	if waitAcks {
		t := time.AfterFunc(timeout, func() { close(stopWait) })
		close(queue)
		<-recDone
		t.Stop()
	} else {
		close(stopWait)
		close(queue)
		<-recDone
	}
	info := c.ConnectionInfo()
	c.Close()
	closed = true

	p.mu.Lock()
	defer p.mu.Unlock()
	if cf.stats == "json" {
		cs := connectionStats(info, dialDur)
		printStats(p.app.stdout, records.PubStats{ConnectionStats: cs, Connection: cs, Role: records.RolePub,
			Topic: p.topic, QoS: int(p.qos), Size: p.size, Sent: p.sent, Acked: p.acked, Failed: p.failed,
			FirstSendNs: firstSendNs, LastAcceptedNs: p.lastAcceptedNs})
	}
	short := ctx.Err() == nil && p.sent < count && gate == nil
	if p.failed == 0 && !short {
		return nil
	}
	msg := fmt.Sprintf("sent %d of %d messages, %d not accepted", p.sent, count, p.failed)
	switch {
	case p.firstErr != nil:
		msg += fmt.Sprintf("; first error: %v", p.firstErr)
	case c.Err() != nil:
		msg += fmt.Sprintf("; %v", c.Err())
	}
	return &exitError{code: exitFailure, msg: msg}
}

// finish waits for one receipt (until stop) and records the outcome.
func (p *publisher) finish(pe pending, stop <-chan struct{}) {
	var (
		acceptedNs int64
		err        = pe.err
	)
	if err == nil {
		select {
		case <-pe.r.Done():
			err = pe.r.Err()
		case <-stop:
			err = fmt.Errorf("no acknowledgement within --timeout")
		}
		if at, ok := pe.r.Accepted(); ok {
			acceptedNs = at.UnixNano()
		}
	}
	p.mu.Lock()
	if err == nil {
		p.acked++
		p.lastAcceptedNs = acceptedNs
	} else {
		p.failed++
		if p.firstErr == nil {
			p.firstErr = err
		}
	}
	p.mu.Unlock()
	if p.recs != nil {
		r := records.PubRecord{Seq: int64(pe.seq), Size: pe.size, SendNs: pe.sendNs, AcceptedNs: acceptedNs, OK: err == nil}
		if err != nil {
			r.Error = err.Error()
		}
		_ = p.recs.Write(r)
	}
}

// readLines signals once per line read from r and closes the channel at the
// end of input. The reading goroutine ends with the input (a blocked read of
// standard input cannot be interrupted; the process exit ends it).
func readLines(r io.Reader, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" || err == nil {
				select {
				case ch <- struct{}{}:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// body returns a fresh message body: zeroed measurement payload of --size
// bytes (the header is written just before the hand-over) or -m.
func (p *publisher) body() []byte {
	if p.size > 0 {
		return make([]byte, p.size)
	}
	return []byte(p.message)
}
