package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/internal/mqttname"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport/endpoint"
)

func (a *app) pubCommand() *Command {
	c := &Command{
		Name:      "pub",
		UsageLine: "iotq pub --url URL -t TOPIC (-m MESSAGE | --size N) [flags]",
		Short:     "publish MQTT messages (measurement payloads with --size)",
		Long: `Pub connects to a broker and publishes -n messages on topic -t, in the
spirit of mosquitto_pub, over any transport of iotq (--url mqtt://, mqtts://,
ws://, wss://, quic://; CoAP: coap://, coaps://, coap+tcp://, coaps+tcp://,
coap+quic://, where -q 0 sends a non-confirmable PUT and -q 1 or 2 a
confirmable one, see docs/coap.md; AMQP 1.0: amqp://, amqps://, amqp+quic://
through iotq gateway, where -q 0 sends pre-settled and -q 1 waits for the
accepted disposition, see docs/amqp.md).

The message is -m MESSAGE, or with --size N a measurement payload: a 16-byte
header (magic, version, sequence number 0,1,2..., send time in Unix ns; from
24 bytes on also a random id of this run) padded to N bytes, which iotq sub
turns into one-way delays. The send time is taken just before the message
is handed to the MQTT library.

Messages leave every --interval (0: back to back; with --closed-loop each
only after the previous one's receipt completed), or with --gate stdin one
per line read from standard input (stop-and-wait: the lab feeds the lines
that iotq sub --notify stdout prints); end of input stops. --gate also takes
a file path.

Each publish returns a receipt: accepted when the broker acknowledged it
(PUBACK for QoS 1, PUBCOMP for QoS 2) or when it was handed to the transport
(QoS 0). --wait-acks (on by default) waits up to --timeout for all receipts
before disconnecting. --records FILE writes one CSV row per message:
seq,size,send_ns,accepted_ns,ok,error,topic,ready_ns (ready_ns: paced
messages, the later of the due time and the previous hand-over's return).
--stats json prints one JSON object with the connection facts (transport,
protocol, used_0rtt, tls_resumed,
dial_start_ns, transport_ready_ns, connack_ns, dial_ms = duration of the
whole connect call, transport_ready_ms and connack_ms counted from
dial_start) and the counts sent, acked, failed.

--early sends message 0 in the same write as CONNECT, before the CONNACK
(QoS 0 or 1; MQTT lets a client send right after CONNECT). Over QUIC with a
ticket from --session-cache it rides in the 0-RTT flight, so it can arrive
half a round trip after the dial began (if the broker processes early data:
iotq broker --quic-0rtt=accept; the default hold processes it once the
handshake completed, docs/0rtt.md); without --early the MQTT library waits
for CONNACK before the first PUBLISH. At QoS 1 its receipt completes on the
broker's PUBACK, as every other message's. Its send time is taken before the
dial, and early_sent_ns in --stats tells when it was written. For AMQP
(amqp://, amqps://, amqp+quic://) --early pipelines the whole start: protocol
header, SASL, open, begin, attach and the message's transfer leave in one
write without waiting for the broker (over amqp+quic with a ticket: in the
0-RTT flight, if the gateway route accepts 0-RTT for amqp); at QoS 1 its
receipt completes on the broker's accepted disposition (docs/amqp.md).

For AMQP, --property KEY=VALUE (repeatable) sets application properties
and --message-id ID the message id of each message (iotq sub prints them);
other protocols refuse both. --persistent is refused for an AMQP publisher
(it makes iotq sub's subscriptions durable).

--reconnect (MQTT; not with --gate, --closed-loop or --early) survives a
lost connection, as a device whose address or network changes must: it
dials again at once with the same client id (and --session-cache: TLS
session resumption, QUIC 0-RTT), then with backoff (250ms doubling to 2s)
for up to --timeout after the loss (one dial at most a third of it),
publishes again every QoS 1/2 message
not yet acknowledged (same sequence number and send time; a new PUBLISH,
so one that had reached the broker arrives twice) and continues the
sequence, sending at once what fell due meanwhile. One line on standard
error per reconnection; --stats json adds reconnects, resent and
reconnect_events (lost_ns, connected_ns, ms, attempts, resent,
tls_resumed, cause). MQTT over QUIC keeps its connection through a NAT
rebinding (the broker follows the new address), so it reconnects only if
the connection really ends. Use --persistent to keep the session.

--topics N publishes over one connection on N topics, TOPIC/0 ... TOPIC/N-1
(E9, head-of-line blocking): each topic -n measurement payloads of --size
bytes every --interval, topic k starting k/N of an interval after topic 0;
--large-size BYTES --large-interval D adds the topic TOPIC/large, one
message of BYTES every D while the periodic topics run (half a topic slot
after topic 0). Sequence numbers count across all topics in the order the
messages are due, and each topic is published from a goroutine of its own,
so a message held up in the client holds up only its own topic. Subscribe
with TOPIC/#. --topics takes neither -m, -f, -s, --gate, --closed-loop,
--early, --reconnect, -r, --property nor --message-id.

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
		closed   bool
		timeout  time.Duration
		early    bool
		props    stringList
		msgID    string
		recon    bool
	)
	cf.register(fs)
	fs.StringVar(&topic, "t", "", "`topic` to publish to (required)")
	fs.StringVar(&message, "m", "", "`message` to publish")
	fs.IntVar(&size, "size", 0, "publish measurement payloads of `N` bytes (at least 16)")
	fs.BoolVar(&retain, "r", false, "set the retain flag")
	fs.IntVar(&count, "n", 1, "number of messages to publish (with --gate: at most); not mosquitto_pub's -n (a null message): use -m ''")
	var (
		msgFile   string
		msgStdin  bool
		lineStdin bool
	)
	fs.StringVar(&msgFile, "f", "", "publish the contents of `FILE` as the message (as mosquitto_pub's -f)")
	fs.BoolVar(&msgStdin, "s", false, "publish all of standard input as one message (as mosquitto_pub's -s)")
	fs.BoolVar(&lineStdin, "l", false, "mosquitto_pub's one message per line of standard input: not supported (see the error)")
	fs.DurationVar(&interval, "interval", 0, "time between messages (0: back to back)")
	fs.StringVar(&gate, "gate", "", "publish one message per line read from `SOURCE`: stdin or a file path")
	fs.BoolVar(&waitAcks, "wait-acks", true, "for QoS 1/2 wait for all acknowledgements before exiting")
	fs.BoolVar(&closed, "closed-loop", false, "publish the next message only after the previous one's receipt (acknowledged or failed)")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "bound for connecting and for the final wait for acknowledgements")
	fs.Var(&props, "property", "application property `KEY=VALUE` of every message (repeatable; AMQP only)")
	fs.StringVar(&msgID, "message-id", "", "message `ID` (AMQP only; with -n above 1 message SEQ gets ID-SEQ)")
	fs.BoolVar(&recon, "reconnect", false, "when the connection is lost, dial again (same client id, within --timeout) and publish the unacknowledged messages again (MQTT)")
	var tf topicFlags
	tf.register(fs)
	fs.BoolVar(&early, "early", false, "send the first message right behind CONNECT, before CONNACK (QoS 0 or 1; QUIC 0-RTT: in the first flight)")
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected arguments %q", args)
		}
		if err := cf.check(); err != nil {
			return err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		msgSet := set["m"] // -m given, perhaps empty (mosquitto_pub's -n null message)
		if tf.on() {
			// several topics over one connection (E9): pubtopics.go
			if topic == "" {
				return usageErrorf("-t TOPIC is required: with --topics N the messages go to TOPIC/0 ... TOPIC/N-1")
			}
			if err := tf.conflicts(set, size, interval); err != nil {
				return err
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive")
			}
			if cf.ep.Protocol == endpoint.ProtocolMQTT {
				if err := mqttname.CheckTopic(topic); err != nil {
					return usageErrorf("-t: %v", err)
				}
			}
			return a.publishTopics(ctx, &cf, tf, topic, size, count, interval, waitAcks, timeout)
		}
		sources := 0
		for _, on := range []bool{msgSet, msgFile != "", msgStdin, size > 0} {
			if on {
				sources++
			}
		}
		switch {
		case lineStdin:
			return usageErrorf("-l (a message per line of standard input) is not supported: run iotq pub -m LINE per line, or --gate stdin to publish -m MESSAGE once per line read")
		case topic == "":
			return usageErrorf("-t TOPIC is required")
		case sources > 1:
			return usageErrorf("give one of -m MESSAGE, -f FILE, -s or --size N")
		case sources == 0:
			return usageErrorf("give -m MESSAGE (-m '' for an empty one), -f FILE, -s (standard input) or --size N (a measurement payload of N bytes)")
		case timeout <= 0:
			return usageErrorf("--timeout must be positive")
		}
		switch {
		case msgFile != "":
			b, err := os.ReadFile(msgFile)
			if err != nil {
				return usageErrorf("-f: %v", err)
			}
			message = string(b)
		case msgStdin:
			b, err := io.ReadAll(os.Stdin)
			if err != nil {
				return fmt.Errorf("-s: read standard input: %w", err)
			}
			message = string(b)
		}
		if cf.ep.Protocol == endpoint.ProtocolMQTT {
			if err := mqttname.CheckTopic(topic); err != nil {
				return usageErrorf("-t: %v", err)
			}
		}
		properties, err := parseProperties(props)
		if err != nil {
			return err
		}
		if cf.ep.Protocol != endpoint.ProtocolAMQP && (len(properties) > 0 || msgID != "") {
			return usageErrorf("--property and --message-id: AMQP only (amqp://, amqps://, amqp+quic://); %s messages have no place for them", cf.ep.Protocol)
		}
		if cf.ep.Protocol == endpoint.ProtocolAMQP && cf.persistent {
			return usageErrorf("--persistent: an AMQP publisher keeps no session; it makes subscriptions durable (iotq sub --persistent --client-id ID)")
		}
		po := measure.PublisherOptions{Topic: topic, QoS: byte(cf.qos), Retain: retain, Message: []byte(message),
			Size: size, Count: count, Interval: interval, Early: early, ClosedLoop: closed,
			Properties: properties, MessageID: msgID}
		if waitAcks {
			po.AckWait = timeout
		}
		if recon {
			if cf.ep.Protocol != endpoint.ProtocolMQTT {
				return usageErrorf("--reconnect: MQTT only, not %s", cf.ep.Scheme)
			}
			po.Reconnect = a.pubReconnect(ctx, &cf, timeout)
		}
		if gate != "" {
			r, closeGate, err := openGate(gate)
			if err != nil {
				return usageErrorf("--gate: %v", err)
			}
			defer closeGate()
			stop := make(chan struct{})
			defer close(stop)
			po.Gate = readLines(r, stop)
		}
		var recs *records.Writer[records.PubRecord]
		if cf.records != "" {
			var err error
			if recs, err = createRecords[records.PubRecord](cf.records); err != nil {
				return err
			}
			po.OnResult = func(r measure.Result) { _ = recs.Write(pubRecord(r)) }
		}
		p, err := measure.NewPublisher(po)
		if err != nil {
			return usageErrorf("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		runErr := a.publish(ctx, &cf, p, po, timeout)
		if err := recs.Close(); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	})
	return c
}

// publish connects, runs p, prints --stats and turns the summary into the
// exit status.
func (a *app) publish(ctx context.Context, cf *clientFlags, p *measure.Publisher, po measure.PublisherOptions, timeout time.Duration) error {
	early, ok := p.EarlyMessage(ctx)
	if !ok {
		return nil // the gate closed before the first message
	}
	c, dialDur, err := connect(ctx, cf, timeout, early)
	if err != nil {
		return err
	}
	defer c.Close()
	if cf.clientID == "" {
		cf.clientID = c.ConnectionInfo().ClientID // --reconnect dials again as the same client
	}
	sum := p.Run(ctx, c)
	info := c.ConnectionInfo() // after the run: QUIC's path statistics are read now
	c.Close()
	if cf.stats == "json" {
		cs := connectionStats(info, dialDur)
		printStats(a.stdout, records.PubStats{ConnectionStats: cs, Role: records.RolePub,
			Topic: po.Topic, QoS: int(po.QoS), Size: po.Size, Sent: sum.Sent, Acked: sum.Acked, Failed: sum.Failed,
			FirstSendNs: sum.FirstSendNs, LastAcceptedNs: sum.LastAcceptedNs,
			Reconnects: reconnected(sum.Reconnects), Resent: sum.Resent, ReconnectEvents: reconnectEvents(sum.Reconnects)})
	}
	short := ctx.Err() == nil && sum.Sent < po.Count && po.Gate == nil
	if sum.Failed == 0 && !short {
		return nil
	}
	msg := fmt.Sprintf("sent %d of %d messages, %d not accepted", sum.Sent, po.Count, sum.Failed)
	switch {
	case sum.FirstErr != nil:
		msg += fmt.Sprintf("; first error: %v", sum.FirstErr)
	case c.Err() != nil:
		msg += fmt.Sprintf("; %v", c.Err())
	}
	if n := len(sum.Reconnects); n > 0 && sum.Reconnects[n-1].Err != nil {
		msg += fmt.Sprintf("; %v", sum.Reconnects[n-1].Err)
	}
	return &exitError{code: exitFailure, msg: msg}
}

// pubRecord is the --records row of one message.
func pubRecord(r measure.Result) records.PubRecord {
	rec := records.PubRecord{Seq: int64(r.Seq), Size: r.Size, SendNs: r.SendNs, AcceptedNs: r.AcceptedNs, OK: r.Err == nil, Topic: r.Topic, ReadyNs: r.ReadyNs}
	if r.Err != nil {
		rec.Error = r.Err.Error()
	}
	return rec
}

// openGate opens the --gate source: stdin ("stdin" or "-") or a file.
func openGate(src string) (io.Reader, func(), error) {
	if src == "stdin" || src == "-" {
		return os.Stdin, func() {}, nil
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
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

// parseProperties turns --property KEY=VALUE flags into a map.
func parseProperties(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--property %q: want KEY=VALUE", kv)
		}
		if _, dup := m[k]; dup {
			return nil, usageErrorf("--property %q: key %s given twice", kv, k)
		}
		m[k] = v
	}
	return m, nil
}
