package contracttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport/endpoint"
)

// Capabilities are what a row's protocol can do beyond the common core.
// A missing capability is not skipped: the suite checks that it is
// refused with a clear error.
type Capabilities struct {
	// QoS2: Publish with QoS 2 is delivered exactly once. Without it,
	// Publish(QoS 2) must fail at once with an error mentioning "QoS 2".
	QoS2 bool
	// Wildcards: subscription filters with + and # match topics. Without
	// it, Subscribe with a wildcard must fail at once with an error
	// mentioning "wildcard".
	Wildcards bool
	// LossBound bounds how long a pending QoS 1 receipt may stay pending
	// after its broker went away (a relay that black-holes, then closes).
	// It must cover the protocol's own timeouts as the row configures them
	// (BrokerGoneOptions, BrokerGoneQuery). Zero: 10s.
	LossBound time.Duration
	// LossErr is the error such a receipt wraps: client.ErrConnectionLost
	// where a connection ends (TCP, TLS, WebSocket, QUIC), the message
	// layer's timeout where there is none (CoAP over UDP and DTLS).
	LossErr error
	// Connection: the transport has a connection whose end the client
	// notices, so when the broker goes away Done is closed and Err wraps
	// client.ErrConnectionLost. CoAP over UDP and DTLS has none.
	Connection bool
}

// Row is one protocol x transport (x version) the API supports.
type Row struct {
	// Name of the subtest, e.g. "mqtt5/quic".
	Name string
	// URL the row dials (a server the caller started on loopback).
	URL string
	// Options to dial with (CA file, PSK identity, protocol version...).
	Options client.Options
	// Protocol is what ConnectionInfo.Protocol must say, e.g. "mqtt/5".
	Protocol string
	// Caps are the row's capabilities.
	Caps Capabilities
	// BrokerGoneOptions, if set, adjusts the options of the client of the
	// broker-gone case (e.g. a short QUIC idle timeout: over UDP nothing
	// tells a client that its peer vanished but silence).
	BrokerGoneOptions func(*client.Options)
	// BrokerGoneQuery is appended to the URL of the broker-gone case
	// (e.g. shorter CoAP retransmission parameters).
	BrokerGoneQuery string
}

// Run runs every case on every row, as subtests ROW/CASE.
func Run(t *testing.T, rows []Row) {
	for _, row := range rows {
		t.Run(row.Name, func(t *testing.T) {
			ep, err := client.ParseURL(row.URL)
			if err != nil {
				t.Fatalf("row %s: %v", row.Name, err)
			}
			for _, c := range cases() {
				t.Run(c.name, func(t *testing.T) { c.run(t, row, ep) })
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, row Row, ep client.Endpoint)
}

func cases() []testCase {
	return []testCase{
		{"pubsub", pubsub},
		{"receipts", receipts},
		{"info", info},
		{"close", closeCase},
		{"qos2", qos2},
		{"wildcards", wildcards},
		{"broker-gone", brokerGone},
		{"close-pending", closePending},
	}
}

// wait bounds every single step of a case.
func wait() time.Duration { return testutil.Scale(10 * time.Second) }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// topic returns a topic name unique to the test, valid in every protocol
// (an AMQP address, a CoAP path segment, an MQTT topic): dots, no slashes.
func topic(t *testing.T) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '.'
	}, t.Name())
	return "contract." + name + "." + hex.EncodeToString(b)
}

func dialURL(t *testing.T, url string, o client.Options) client.Client {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testutil.Logger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, url, o)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// inbox collects live messages (not retained copies) of a subscription.
type inbox chan client.Message

func (b inbox) handle(m client.Message) {
	if m.Retained {
		return
	}
	select {
	case b <- m:
	default:
	}
}

func (b inbox) next(t *testing.T) client.Message {
	t.Helper()
	select {
	case m := <-b:
		return m
	case <-time.After(wait()):
		t.Fatalf("no message within %s", wait())
		return client.Message{}
	}
}

// accepted publishes and waits for the receipt; it returns the time
// before the publish and the acceptance time.
func accepted(t *testing.T, c client.Client, topic string, payload []byte, qos byte) (before, at time.Time) {
	t.Helper()
	ctx := ctxFor(t)
	before = time.Now()
	r, err := c.Publish(ctx, topic, payload, client.PublishOptions{QoS: qos})
	if err != nil {
		t.Fatalf("publish QoS %d: %v", qos, err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait())
	defer cancel()
	if err := r.Wait(wctx); err != nil {
		t.Fatalf("QoS %d receipt: %v", qos, err)
	}
	at, ok := r.Accepted()
	if !ok {
		t.Fatalf("QoS %d receipt: Wait returned nil but Accepted is false", qos)
	}
	return before, at
}

func pubsub(t *testing.T, row Row, _ client.Endpoint) {
	ctx := ctxFor(t)
	top := topic(t)
	sub := dialURL(t, row.URL, row.Options)
	box := make(inbox, 16)
	if err := sub.Subscribe(ctx, top, client.SubscribeOptions{QoS: 1}, box.handle); err != nil {
		t.Fatalf("subscribe %s: %v", top, err)
	}
	pub := dialURL(t, row.URL, row.Options)
	for _, qos := range []byte{1, 0} {
		payload := []byte(fmt.Sprintf("payload at QoS %d", qos))
		accepted(t, pub, top, payload, qos)
		m := box.next(t)
		if m.Topic != top || string(m.Payload) != string(payload) {
			t.Fatalf("QoS %d: got %q on %q, want %q on %q", qos, m.Payload, m.Topic, payload, top)
		}
		if m.Received.IsZero() {
			t.Fatalf("QoS %d: message without a Received time", qos)
		}
	}
}

func receipts(t *testing.T, row Row, _ client.Endpoint) {
	c := dialURL(t, row.URL, row.Options)
	top := topic(t)
	for _, qos := range []byte{1, 0} {
		before, at := accepted(t, c, top, []byte("r"), qos)
		if at.Before(before) {
			t.Fatalf("QoS %d: accepted at %s, before the publish at %s", qos, at.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano))
		}
		if after := time.Now(); at.After(after) {
			t.Fatalf("QoS %d: accepted at %s, in the future (now %s)", qos, at.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
		}
	}
}

func info(t *testing.T, row Row, ep client.Endpoint) {
	c := dialURL(t, row.URL, row.Options)
	accepted(t, c, topic(t), []byte("i"), 1) // some protocols attach links on first use
	in := c.ConnectionInfo()
	if in.Protocol != row.Protocol {
		t.Errorf("Protocol %q, want %q", in.Protocol, row.Protocol)
	}
	if in.Transport != string(ep.Scheme) {
		t.Errorf("Transport %q, want the URL's scheme %q", in.Transport, ep.Scheme)
	}
	if in.URL == "" || in.ClientID == "" {
		t.Errorf("URL %q ClientID %q: want both set", in.URL, in.ClientID)
	}
	if in.DialStart.IsZero() || in.TransportReady.Before(in.DialStart) || in.Connack.Before(in.TransportReady) {
		t.Errorf("want DialStart (%s) <= TransportReady (%s) <= Connack (%s), all set",
			in.DialStart.Format(time.RFC3339Nano), in.TransportReady.Format(time.RFC3339Nano), in.Connack.Format(time.RFC3339Nano))
	}
	if quic := ep.Transport == endpoint.TransportQUIC; quic != (in.QUIC != nil) {
		t.Errorf("QUIC statistics present %v over transport %s", in.QUIC != nil, ep.Transport)
	}
}

func closeCase(t *testing.T, row Row, _ client.Endpoint) {
	ctx := ctxFor(t)
	c := dialURL(t, row.URL, row.Options)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(wait()):
		t.Fatal("Done not closed after Close")
	}
	if err := c.Err(); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Err after Close = %v, want client.ErrClosed", err)
	}
	for _, qos := range []byte{0, 1} {
		if _, err := c.Publish(ctx, topic(t), []byte("late"), client.PublishOptions{QoS: qos}); !errors.Is(err, client.ErrClosed) {
			t.Errorf("Publish QoS %d after Close = %v, want client.ErrClosed", qos, err)
		}
	}
	if err := c.Subscribe(ctx, topic(t), client.SubscribeOptions{}, func(client.Message) {}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want client.ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v, want nil (idempotent)", err)
	}
}

// refused checks an error for a missing capability: immediate, not a
// timeout, and naming the feature.
func refused(t *testing.T, what string, err error, mention string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: accepted, but the row does not declare the capability (declare it, or refuse it)", what)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		t.Fatalf("%s: timed out instead of a clear refusal: %v", what, err)
	case !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(mention)):
		t.Fatalf("%s: error %q does not mention %q", what, err, mention)
	}
}

func qos2(t *testing.T, row Row, _ client.Endpoint) {
	ctx := ctxFor(t)
	top := topic(t)
	pub := dialURL(t, row.URL, row.Options)
	if !row.Caps.QoS2 {
		start := time.Now()
		_, err := pub.Publish(ctx, top, []byte("q2"), client.PublishOptions{QoS: 2})
		refused(t, "Publish QoS 2", err, "QoS 2")
		if d := time.Since(start); d > wait() {
			t.Fatalf("refusal took %s", d)
		}
		// The client stays usable after the refusal.
		accepted(t, pub, top, []byte("q1"), 1)
		return
	}
	sub := dialURL(t, row.URL, row.Options)
	box := make(inbox, 4)
	if err := sub.Subscribe(ctx, top, client.SubscribeOptions{QoS: 2}, box.handle); err != nil {
		t.Fatal(err)
	}
	accepted(t, pub, top, []byte("q2"), 2)
	if m := box.next(t); string(m.Payload) != "q2" || m.QoS != 2 {
		t.Fatalf("got %q QoS %d, want \"q2\" QoS 2", m.Payload, m.QoS)
	}
	select {
	case m := <-box:
		t.Fatalf("QoS 2 message delivered twice: %q", m.Payload)
	case <-time.After(200 * time.Millisecond):
	}
}

func wildcards(t *testing.T, row Row, _ client.Endpoint) {
	ctx := ctxFor(t)
	base := topic(t)
	sub := dialURL(t, row.URL, row.Options)
	box := make(inbox, 4)
	err := sub.Subscribe(ctx, base+"/+", client.SubscribeOptions{QoS: 1}, box.handle)
	if !row.Caps.Wildcards {
		refused(t, "Subscribe "+base+"/+", err, "wildcard")
		err = sub.Subscribe(ctx, base+"/#", client.SubscribeOptions{QoS: 1}, box.handle)
		refused(t, "Subscribe "+base+"/#", err, "wildcard")
		return
	}
	if err != nil {
		t.Fatalf("subscribe %s/+: %v", base, err)
	}
	pub := dialURL(t, row.URL, row.Options)
	accepted(t, pub, base+"/a", []byte("w"), 1)
	if m := box.next(t); m.Topic != base+"/a" || string(m.Payload) != "w" {
		t.Fatalf("got %q on %q", m.Payload, m.Topic)
	}
}

// viaRelay dials the row through a new relay (with the broker-gone
// options) and checks that a QoS 1 publish gets through.
func viaRelay(t *testing.T, row Row, ep client.Endpoint) (client.Client, *Relay, string) {
	t.Helper()
	network := "tcp"
	switch ep.Transport {
	case endpoint.TransportUDP, endpoint.TransportDTLS, endpoint.TransportQUIC:
		network = "udp"
	}
	relay, addr := StartRelay(t, network, ep.Address())
	url := strings.Replace(row.URL, ep.Address(), addr, 1)
	if row.BrokerGoneQuery != "" {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + row.BrokerGoneQuery
	}
	o := row.Options
	if o.ServerName == "" {
		o.ServerName = ep.Host // the certificate names the broker, not the relay's port
	}
	if row.BrokerGoneOptions != nil {
		row.BrokerGoneOptions(&o)
	}
	c := dialURL(t, url, o)
	top := topic(t)
	accepted(t, c, top, []byte("before"), 1) // the relay works
	return c, relay, top
}

func brokerGone(t *testing.T, row Row, ep client.Endpoint) {
	c, relay, top := viaRelay(t, row, ep)
	relay.Freeze()
	ctx := ctxFor(t)
	r, err := c.Publish(ctx, top, []byte("lost"), client.PublishOptions{QoS: 1})
	if err != nil {
		// Refused at once (the client saw the loss already): also an end.
		return
	}
	if _, ok := r.Accepted(); ok {
		t.Fatal("receipt accepted although the relay dropped the publish")
	}
	relay.Vanish()
	bound := row.Caps.LossBound
	if bound == 0 {
		bound = 10 * time.Second
	}
	bound = testutil.Scale(bound)
	start := time.Now()
	select {
	case <-r.Done():
		err := r.Err()
		if err == nil {
			t.Fatal("receipt accepted although the broker went away")
		}
		t.Logf("receipt ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
		if row.Caps.LossErr != nil && !errors.Is(err, row.Caps.LossErr) {
			t.Fatalf("receipt error %v does not wrap %v", err, row.Caps.LossErr)
		}
		if !row.Caps.Connection {
			return
		}
		select {
		case <-c.Done():
		case <-time.After(wait()):
			t.Fatal("Done not closed after the connection was lost")
		}
		if err := c.Err(); !errors.Is(err, client.ErrConnectionLost) {
			t.Fatalf("Err after the broker went away = %v, want client.ErrConnectionLost", err)
		}
	case <-time.After(bound):
		t.Fatalf("receipt still pending %s after the broker went away", bound)
	}
}

// closePending: a QoS 1 receipt still pending when Close is called (its
// broker silent) completes with client.ErrClosed, and Close returns.
func closePending(t *testing.T, row Row, ep client.Endpoint) {
	c, relay, top := viaRelay(t, row, ep)
	relay.Freeze()
	r, err := c.Publish(ctxFor(t), top, []byte("pending"), client.PublishOptions{QoS: 1})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-r.Done():
	case <-time.After(wait()):
		t.Fatalf("receipt still pending %s after Close", wait())
	}
	if err := r.Err(); !errors.Is(err, client.ErrClosed) {
		t.Errorf("receipt pending at Close ended with %v, want client.ErrClosed", err)
	}
	select {
	case <-closed:
		t.Logf("Close returned after %s", time.Since(start).Round(time.Millisecond))
	case <-time.After(wait()):
		t.Fatalf("Close still running %s after it was called with a silent broker", wait())
	}
}
