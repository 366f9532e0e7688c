package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/internal/mqttname"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport/endpoint"
)

func (a *app) subCommand() *Command {
	c := &Command{
		Name:      "sub",
		UsageLine: "iotq sub --url URL -t FILTER [-t FILTER...] [flags]",
		Short:     "subscribe to MQTT topics and measure one-way delay",
		Long: `Sub connects to a broker, subscribes to every -t filter with QoS -q and
prints each message as "TOPIC PAYLOAD", in the spirit of mosquitto_sub -v.
Messages that carry an iotq measurement payload (iotq pub --size) print as
"TOPIC seq=N size=BYTES delay_ms=D" instead, where the one-way delay is the
receive time minus the send time in the payload (publisher and subscriber
must share a clock: same host, or synchronised clocks).

A message with a message id or application properties (AMQP) prints as
"TOPIC [id=ID KEY=VALUE ...] PAYLOAD" (keys sorted). The topic is the
address the message was sent to (with AMQP wildcards, ActiveMQ Artemis's
sensors.#, not the filter). An AMQP value body that is not text or binary
(map, list, number, null) prints as JSON.

With --persistent over AMQP the subscriptions are durable (--client-id is
required; the broker keeps the subscription and its messages while the
subscriber is away, e.g. ActiveMQ Artemis); a broker that cannot keep them
makes sub fail with a message rather than subscribe without.

It stops after -n messages (0: no limit), when no message arrived for
--timeout (0: never; the wait starts when the subscriptions are granted),
on SIGINT/SIGTERM, or when the connection is lost. With --reconnect (the
default for amqp URLs) a lost connection is dialled again with exponential
backoff (--reconnect-max bounds the wait between attempts; one line on
standard error per attempt) and every -t subscribed again, until -n,
--timeout or a signal; --reconnect=false exits instead. Exit status 1 if -n
was given and not reached, or the connection failed or was lost.

For the lab:
  --ready-file PATH   written (atomically) once every SUBACK arrived
  --notify stdout     print "recv SEQ" for each measurement message, flushed
                      at once, instead of the message lines (the lab relays
                      them to iotq pub --gate stdin for stop-and-wait)
  --records FILE      one CSV row per measurement message:
                      seq,size,send_ns,recv_ns,delay_ns,topic,qos,duplicate
                      (duplicate: the same topic, publisher run and seq
                      was seen before; a second pub run is not a duplicate)
  --stats json        one JSON object at the end: the connection facts as
                      in iotq pub, received (all messages), measured,
                      duplicates, and delay {n, mean_ms, min_ms, p50_ms,
                      p95_ms, p99_ms, max_ms, sd_ms} over first copies;
                      percentiles type 7, as the report computes them.
  --quiet             no per-message lines
  --echo TOPIC        publish every measurement message received (first
                      copies) unchanged to TOPIC, with QoS -q, so that an
                      iotq sub on the sender's side measures the round trip
                      sender -> receiver -> sender (its delay_ns: the
                      payload still carries the original send time)

The connection flags are those of iotq pub.`,
		Flags: newFlagSet("sub"),
	}
	fs := c.Flags
	var (
		cf        clientFlags
		topics    stringList
		count     int
		timeout   time.Duration
		connectTO time.Duration
		readyFile string
		notify    string
		quiet     bool
		echo      string
		reconnect bool
		recMax    time.Duration
	)
	cf.register(fs)
	fs.Var(&topics, "t", "topic `filter` to subscribe to (repeatable, + and # allowed)")
	fs.IntVar(&count, "n", 0, "exit after `COUNT` messages (0: no limit)")
	fs.IntVar(&count, "C", 0, "same as -n (mosquitto_sub's -C)")
	fs.Bool("v", false, "accepted for mosquitto_sub's -v: iotq sub always prints the topic before the payload")
	fs.DurationVar(&timeout, "timeout", 0, "exit when no message arrived for this `duration` (0: never)")
	fs.DurationVar(&connectTO, "connect-timeout", 30*time.Second, "bound for connecting and subscribing")
	fs.StringVar(&readyFile, "ready-file", "", "write `PATH` once the broker granted every subscription")
	fs.StringVar(&notify, "notify", "", "print \"recv SEQ\" per measurement message to: stdout")
	fs.BoolVar(&quiet, "quiet", false, "do not print a line per message")
	fs.BoolVar(&reconnect, "reconnect", false, "when the connection is lost, dial again with backoff and resubscribe (default true for amqp URLs)")
	fs.DurationVar(&recMax, "reconnect-max", 30*time.Second, "longest wait between reconnection attempts (the first waits 500ms, each next twice as long)")
	fs.StringVar(&echo, "echo", "", "publish each measurement message received unchanged to `TOPIC` (round trips)")
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected arguments %q", args)
		}
		if err := cf.check(); err != nil {
			return err
		}
		switch {
		case len(topics) == 0:
			return usageErrorf("-t FILTER is required (e.g. -t 'sensors/#')")
		case count < 0:
			return usageErrorf("-n %d: must not be negative", count)
		case timeout < 0 || connectTO <= 0:
			return usageErrorf("--timeout must not be negative and --connect-timeout must be positive")
		case notify != "" && notify != "stdout":
			return usageErrorf("--notify %q: want stdout", notify)
		case echo != "" && (strings.ContainsAny(echo, "+#") || count <= 0):
			return usageErrorf("--echo %q: want a topic without wildcards, and -n COUNT (it bounds the echoes)", echo)
		}
		reconnectSet := false
		fs.Visit(func(f *flag.Flag) { reconnectSet = reconnectSet || f.Name == "reconnect" })
		if !reconnectSet {
			reconnect = cf.ep.Protocol == endpoint.ProtocolAMQP && echo == ""
		}
		switch {
		case reconnect && echo != "":
			return usageErrorf("--reconnect with --echo: the echoes need one connection; give --reconnect=false")
		case recMax <= 0:
			return usageErrorf("--reconnect-max must be positive")
		}
		if cf.ep.Protocol == endpoint.ProtocolMQTT {
			for _, f := range topics {
				if err := mqttname.CheckFilter(f); err != nil {
					return usageErrorf("-t: %v", err)
				}
			}
		}
		var recs *records.Writer[records.SubRecord]
		if cf.records != "" {
			var err error
			if recs, err = createRecords[records.SubRecord](cf.records); err != nil {
				return err
			}
		}
		s := &subscriber{out: bufio.NewWriter(a.stdout), errw: a.stderr, recs: recs, quiet: quiet, notify: notify == "stdout",
			reconnect: reconnect, reconnectMax: recMax,
			limit: count, msgCh: make(chan struct{}, 1), full: make(chan struct{})}
		if echo != "" {
			s.echoTopic, s.echoCh = echo, make(chan []byte, count)
		}
		runErr := s.run(ctx, &cf, topics, timeout, connectTO, readyFile)
		if err := recs.Close(); err != nil && runErr == nil {
			runErr = err
		}
		return runErr
	})
	return c
}

// subscriber runs one sub invocation. handle runs on the client's handler
// goroutine; run reads the counters under mu after the client closed.
type subscriber struct {
	mu   sync.Mutex
	out  *bufio.Writer
	errw io.Writer // reconnection lines

	reconnect    bool
	reconnectMax time.Duration
	recs         *records.Writer[records.SubRecord]
	quiet        bool
	notify       bool

	received int
	rx       measure.Receiver
	limit    int
	msgCh    chan struct{} // a message arrived (cap 1)
	full     chan struct{} // closed when limit reached

	// --echo: payloads to publish back (cap: the -n limit), on echoTopic
	echoTopic  string
	echoCh     chan []byte
	echoClosed bool // echoCh is closed (under mu)
}

// echoes publishes the payloads of echoCh until it is closed, then waits
// for their receipts (bounded by wait). It returns how many failed.
func (s *subscriber) echoes(c client.Client, qos byte, wait time.Duration) int {
	var receipts []*client.Receipt
	failed := 0
	for p := range s.echoCh {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		r, err := c.Publish(ctx, s.echoTopic, p, client.PublishOptions{QoS: qos})
		cancel()
		if err != nil {
			failed++
			continue
		}
		receipts = append(receipts, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, r := range receipts {
		if r.Wait(ctx) != nil {
			failed++
		}
	}
	return failed
}

func (s *subscriber) handle(m client.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 && s.received >= s.limit {
		return
	}
	s.received++
	if o, ok := s.rx.Observe(m); ok {
		if s.echoCh != nil && !s.echoClosed && !o.Duplicate {
			select {
			case s.echoCh <- append([]byte(nil), m.Payload...):
			default: // more than -n: not echoed
			}
		}
		if s.recs != nil {
			_ = s.recs.Write(records.SubRecord{Seq: int64(o.Header.Seq), Size: len(m.Payload), SendNs: o.Header.SendNs,
				RecvNs: o.RecvNs, DelayNs: o.DelayNs, Topic: m.Topic, QoS: int(m.QoS), Duplicate: o.Duplicate})
		}
		switch {
		case s.notify:
			fmt.Fprintf(s.out, "recv %d\n", o.Header.Seq)
			s.out.Flush()
		case !s.quiet:
			fmt.Fprintf(s.out, "%s seq=%d size=%d delay_ms=%.3f\n", m.Topic, o.Header.Seq, len(m.Payload), float64(o.DelayNs)/1e6)
			s.out.Flush()
		}
	} else if !s.quiet && !s.notify {
		fmt.Fprintf(s.out, "%s %s%s\n", m.Topic, messageMeta(m), m.Payload)
		s.out.Flush()
	}
	select {
	case s.msgCh <- struct{}{}:
	default:
	}
	if s.limit > 0 && s.received == s.limit {
		close(s.full)
	}
}

// subscribe subscribes c to every topic, bounded by connectTO.
func (s *subscriber) subscribe(ctx context.Context, c client.Client, qos byte, topics []string, connectTO time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, connectTO)
	defer cancel()
	for _, t := range topics {
		if err := c.Subscribe(sctx, t, client.SubscribeOptions{QoS: qos}, s.handle); err != nil {
			return err
		}
	}
	return nil
}

// First and longest wait between reconnection attempts (--reconnect).
const reconnectFirst = 500 * time.Millisecond

func (s *subscriber) run(ctx context.Context, cf *clientFlags, topics []string, idle, connectTO time.Duration, readyFile string) error {
	c, dialDur, err := connect(ctx, cf, connectTO, nil)
	if err != nil {
		return err
	}
	defer func() { c.Close() }() // c is the current connection
	if err := s.subscribe(ctx, c, byte(cf.qos), topics, connectTO); err != nil {
		return &exitError{code: exitFailure, msg: err.Error()}
	}
	echoDone := make(chan int, 1)
	if s.echoCh != nil {
		go func() { echoDone <- s.echoes(c, byte(cf.qos), connectTO) }()
	}
	if readyFile != "" {
		if err := writeReady(readyFile); err != nil {
			return err
		}
	}

	var idleC <-chan time.Time
	var idleT *time.Timer
	if idle > 0 {
		idleT = time.NewTimer(idle)
		defer idleT.Stop()
		idleC = idleT.C
	}
	var endErr error
	lost := c.Done()
wait:
	for {
		select {
		case <-s.full:
			break wait
		case <-ctx.Done():
			break wait
		case <-lost:
			endErr = fmt.Errorf("connection lost: %v", c.Err())
			if !s.reconnect {
				break wait
			}
			nc, err := s.redial(ctx, cf, topics, connectTO, c.Err(), idleC)
			if err != nil {
				endErr = fmt.Errorf("%v; %v", endErr, err)
				break wait
			}
			c.Close()
			c, lost, endErr = nc, nc.Done(), nil
		case <-s.msgCh:
			if idleT != nil {
				idleT.Reset(idle)
			}
		case <-idleC:
			break wait
		}
	}
	if s.echoCh != nil {
		// no more echoes after the limit or the end; wait for the receipts
		s.mu.Lock()
		s.echoClosed = true
		close(s.echoCh)
		s.mu.Unlock()
		if n := <-echoDone; n > 0 && endErr == nil {
			endErr = fmt.Errorf("%d echoes to %s failed", n, s.echoTopic)
		}
	}
	info := c.ConnectionInfo()
	c.Close()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Flush()
	if cf.stats == "json" {
		cs := connectionStats(info, dialDur)
		printStats(s.out, records.SubStats{ConnectionStats: cs, Role: records.RoleSub, Topics: topics,
			QoS: cf.qos, Received: s.received, Measured: s.rx.Measured(), Duplicates: s.rx.Duplicates(),
			Delay: records.SummarizeDelays(s.rx.DelaysMs())})
		s.out.Flush()
	}
	if endErr != nil {
		return &exitError{code: exitFailure, msg: endErr.Error()}
	}
	if s.limit > 0 && s.received < s.limit && ctx.Err() == nil {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("received %d of %d messages before --timeout %s", s.received, s.limit, idle)}
	}
	return nil
}

// redial dials again after a lost connection, with exponential backoff
// (reconnectFirst, doubling up to s.reconnectMax), one line on standard
// error per attempt, and subscribes every topic again. It gives up when
// ctx ends or the --timeout timer fires (idle: its channel, nil without).
func (s *subscriber) redial(ctx context.Context, cf *clientFlags, topics []string, connectTO time.Duration, why error, idle <-chan time.Time) (client.Client, error) {
	wait := reconnectFirst
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for attempt := 1; ; attempt++ {
		if attempt == 1 {
			fmt.Fprintf(s.errw, "iotq sub: connection lost (%v); reconnecting in %s (attempt %d)\n", why, wait, attempt)
		} else {
			fmt.Fprintf(s.errw, "iotq sub: reconnection failed (%v); reconnecting in %s (attempt %d)\n", why, wait, attempt)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, errors.New("interrupted while reconnecting")
		case <-idle:
			return nil, errors.New("not reconnected within --timeout")
		case <-t.C:
		}
		wait = min(2*wait, s.reconnectMax)
		c, _, err := connect(ctx, cf, connectTO, nil)
		if err != nil {
			why = err
			if ee := (*exitError)(nil); errors.As(err, &ee) {
				why = errors.New(ee.msg)
			}
			continue
		}
		if err := s.subscribe(ctx, c, byte(cf.qos), topics, connectTO); err != nil {
			c.Close()
			why = fmt.Errorf("subscribe again: %w", err)
			continue
		}
		fmt.Fprintf(s.errw, "iotq sub: reconnected and subscribed again (attempt %d)\n", attempt)
		return c, nil
	}
}

// writeReady writes the ready file atomically.
func writeReady(path string) error {
	if err := records.WriteFileAtomic(path, []byte(records.SubReady)); err != nil {
		return fmt.Errorf("ready file: %w (check --ready-file)", err)
	}
	return nil
}

// messageMeta is "[id=ID KEY=VALUE ...] " for a message with a message id
// or properties (keys sorted; values quoted when they hold a space, a
// quote, = or ]), else "".
func messageMeta(m client.Message) string {
	if m.MessageID == "" && len(m.Properties) == 0 {
		return ""
	}
	quote := func(v string) string {
		if v == "" || strings.ContainsAny(v, " \t\n\"=]") {
			return strconv.Quote(v)
		}
		return v
	}
	var parts []string
	if m.MessageID != "" {
		parts = append(parts, "id="+quote(m.MessageID))
	}
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, quote(k)+"="+quote(m.Properties[k]))
	}
	return "[" + strings.Join(parts, " ") + "] "
}
