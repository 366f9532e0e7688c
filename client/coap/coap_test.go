package coap_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/testutil"
)

// startBroker starts a broker with an MQTT listener and every CoAP
// listener; coaps:// accepts the PSK identity "dev1" with key "secret1".
func startBroker(t *testing.T, mod func(*broker.Options)) *broker.Server {
	return startBrokerMod(t, mod)
}

func startBrokerTB(t testing.TB) *broker.Server { return startBrokerMod(t, nil) }

func startBrokerMod(t testing.TB, mod func(*broker.Options)) *broker.Server {
	t.Helper()
	dir := t.TempDir()
	psk := filepath.Join(dir, "psk.txt")
	if err := os.WriteFile(psk, []byte("# identity:key\ndev1:secret1\ndev2:0x736563726574\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := broker.Options{
		Listen: []string{"mqtt://127.0.0.1:0", "coap://127.0.0.1:0", "coaps://127.0.0.1:0", "coap+tcp://127.0.0.1:0",
			"coaps+tcp://127.0.0.1:0", "coap+quic://127.0.0.1:0"},
		StateDir: dir, Store: broker.StoreNone, Metrics: "127.0.0.1:0",
	}
	o.CoAP.PSKFile = psk
	o.Logger = testutil.Logger(t)
	o.ShutdownTimeout = 2 * time.Second
	if mod != nil {
		mod(&o)
	}
	srv, err := broker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv
}

// endpointOf returns the broker's URL for scheme.
func endpointOf(t testing.TB, srv *broker.Server, scheme string) string {
	t.Helper()
	for _, e := range srv.Endpoints() {
		if strings.HasPrefix(e, scheme+"://") {
			return e
		}
	}
	t.Fatalf("broker has no %s listener (has %v)", scheme, srv.Endpoints())
	return ""
}

func dial(t *testing.T, srv *broker.Server, scheme string, o client.Options) client.Client {
	return dialOpts(t, srv, scheme, o)
}

func dialTB(t testing.TB, srv *broker.Server, scheme string) client.Client {
	return dialOpts(t, srv, scheme, client.Options{})
}

func dialOpts(t testing.TB, srv *broker.Server, scheme string, o client.Options) client.Client {
	t.Helper()
	u := endpointOf(t, srv, scheme)
	if scheme == "coaps" && o.Username == "" {
		o.Username, o.Password = "dev1", "secret1"
	}
	o.CAFile = srv.CAFile()
	o.ServerName = "127.0.0.1"
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, u, o)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

type inbox chan client.Message

func (b inbox) handler(m client.Message) { b <- m }

func (b inbox) want(t *testing.T, payload string) {
	t.Helper()
	select {
	case m := <-b:
		if string(m.Payload) != payload {
			t.Fatalf("got %d bytes %.40q, want %d bytes %.40q", len(m.Payload), m.Payload, len(payload), payload)
		}
	case <-time.After(testutil.Scale(10 * time.Second)):
		t.Fatalf("no message %.40q within 10s", payload)
	}
}

func wait(t *testing.T, r *client.Receipt, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPubSubEveryTransport: a CoAP publisher and a CoAP observer on each
// CoAP transport, and MQTT in both directions.
func TestPubSubEveryTransport(t *testing.T) {
	srv := startBroker(t, nil)
	ctx := context.Background()
	mq := dial(t, srv, "mqtt", client.Options{})
	defer func() {
		if t.Failed() {
			return
		}
		// Three publications on each CoAP transport, counted apart.
		for _, scheme := range []string{"coap", "coaps", "coap+tcp", "coaps+tcp", "coap+quic"} {
			name := `iotq_broker_coap_publishes_total{transport="` + scheme + `"}`
			if n := metric(t, srv, name); n != 3 {
				t.Errorf("%s %g, want 3", name, n)
			}
		}
		for _, scheme := range []string{"coap", "coaps"} {
			if n := metric(t, srv, `iotq_broker_coap_message_events_total{event="acknowledged",transport="`+scheme+`"}`); n < 1 {
				t.Errorf("no acknowledged CON message counted on %s", scheme)
			}
		}
		if n := metric(t, srv, `iotq_broker_coap_dtls_handshakes_total{kind="full"}`); n < 1 {
			t.Errorf("no full DTLS handshake counted")
		}
	}()
	fromCoAP := make(inbox, 16)
	// Live messages only: a retained copy may overlap with the live one when
	// the engine's retained scan after SUBACK races with a publication.
	live := func(m client.Message) {
		if !m.Retained {
			fromCoAP <- m
		}
	}
	if err := mq.Subscribe(ctx, "e2e/#", client.SubscribeOptions{QoS: 1}, live); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"coap", "coaps", "coap+tcp", "coaps+tcp", "coap+quic"} {
		t.Run(scheme, func(t *testing.T) {
			topic := "e2e/" + strings.ReplaceAll(scheme, "+", "-")
			sub := dial(t, srv, scheme, client.Options{})
			box := make(inbox, 16)
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, box.handler); err != nil {
				t.Fatal(err)
			}
			pub := dial(t, srv, scheme, client.Options{})
			for i, qos := range []byte{1, 0, 1} {
				r, err := pub.Publish(ctx, topic, []byte{'a' + byte(i)}, client.PublishOptions{QoS: qos})
				wait(t, r, err)
				box.want(t, string(rune('a'+i)))
				fromCoAP.want(t, string(rune('a'+i)))
			}
			// MQTT -> CoAP observer.
			r, err := mq.Publish(ctx, topic, []byte("from-mqtt"), client.PublishOptions{QoS: 1})
			wait(t, r, err)
			box.want(t, "from-mqtt")
			fromCoAP.want(t, "from-mqtt") // the MQTT subscriber's own filter matches too
			// A new observer gets the latest value first.
			late := make(inbox, 4)
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{}, late.handler); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-late:
				if string(m.Payload) != "from-mqtt" || !m.Retained {
					t.Fatalf("late observer got %q retained=%v, want the stored value flagged retained", m.Payload, m.Retained)
				}
			case <-time.After(testutil.Scale(10 * time.Second)):
				t.Fatal("late observer got nothing")
			}
			info := pub.ConnectionInfo()
			if info.Protocol != "coap" || info.Transport != scheme || info.Connack.IsZero() {
				t.Fatalf("connection info %+v", info)
			}
		})
	}
}

// metric returns the value of a metric line (name with labels) from /metrics.
func metric(t *testing.T, srv *broker.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestBlockwise publishes and observes a payload larger than one block.
func TestBlockwise(t *testing.T) {
	srv := startBroker(t, nil)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), 250) // 4000 bytes
	for _, scheme := range []string{"coap", "coap+tcp"} {
		t.Run(scheme, func(t *testing.T) {
			topic := "big/" + strings.ReplaceAll(scheme, "+", "-")
			sub := dial(t, srv, scheme, client.Options{})
			box := make(inbox, 4)
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, box.handler); err != nil {
				t.Fatal(err)
			}
			pub := dial(t, srv, scheme, client.Options{})
			r, err := pub.Publish(ctx, topic, big, client.PublishOptions{QoS: 1})
			wait(t, r, err)
			box.want(t, string(big))
		})
	}
}

// TestACL: the PSK identity is the ACL user; a denied publish fails its
// receipt with 4.03 and reaches nobody.
func TestACL(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("user dev1\ntopic readwrite dev1/#\nuser dev2\ntopic read dev1/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startBroker(t, func(o *broker.Options) {
		o.Auth.ACLFile = acl
		f := false
		o.Auth.AllowAnonymous = &f
	})
	ctx := context.Background()
	sub := dial(t, srv, "coaps", client.Options{Username: "dev2", Password: "secret"})
	box := make(inbox, 4)
	if err := sub.Subscribe(ctx, "dev1/t", client.SubscribeOptions{QoS: 1}, box.handler); err != nil {
		t.Fatal(err)
	}
	r, err := sub.Publish(ctx, "dev1/t", []byte("no"), client.PublishOptions{QoS: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("dev2 may only read dev1/#: want 4.03 Forbidden, got %v", err)
	}
	pub := dial(t, srv, "coaps", client.Options{})
	r, err = pub.Publish(ctx, "dev1/t", []byte("yes"), client.PublishOptions{QoS: 1})
	wait(t, r, err)
	box.want(t, "yes")
	// Anonymous (plain UDP) is refused.
	anon := dial(t, srv, "coap", client.Options{})
	r, err = anon.Publish(ctx, "dev1/t", []byte("anon"), client.PublishOptions{QoS: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx); err == nil {
		t.Fatal("anonymous publish accepted although allow_anonymous is false")
	}
	if s := srv.CoAPStats(); s.Denied < 2 {
		t.Fatalf("denied counter %d, want >= 2", s.Denied)
	}
}

// TestWildcardRefused: CoAP observes one resource.
func TestWildcardRefused(t *testing.T) {
	srv := startBroker(t, nil)
	c := dial(t, srv, "coap", client.Options{})
	err := c.Subscribe(context.Background(), "a/#", client.SubscribeOptions{}, func(client.Message) {})
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a clear refusal, got %v", err)
	}
}

// TestCoAPOverQUIC0RTT: with a ticket file, the second connection to
// coap+quic:// uses 0-RTT (its CSM and first request ride in the first
// flight) and still delivers.
func TestCoAPOverQUIC0RTT(t *testing.T) {
	srv := startBroker(t, nil)
	tickets := filepath.Join(t.TempDir(), "tickets")
	ctx := context.Background()
	used := false
	for i := 0; i < 4 && !used; i++ {
		c := dial(t, srv, "coap+quic", client.Options{SessionCacheFile: tickets})
		r, err := c.Publish(ctx, "q/0rtt", []byte{byte(i)}, client.PublishOptions{QoS: 1})
		wait(t, r, err)
		info := c.ConnectionInfo()
		if i == 0 && (info.Used0RTT || info.TLSResumed) {
			t.Fatalf("first connection: used_0rtt %v tls_resumed %v without a ticket", info.Used0RTT, info.TLSResumed)
		}
		used = info.Used0RTT && info.TLSResumed
		_ = c.Close() // writes the ticket file
	}
	// The ticket arrives after the handshake; on a loaded host the first
	// connection may close before it: later connections then get it.
	if !used {
		t.Fatal("no connection after the first used 0-RTT")
	}
}

// TestDTLSCertificates: without a PSK identity the coaps client
// authenticates the broker by its certificate (ECDHE-ECDSA suites); an
// untrusted CA fails the handshake with a clear error.
func TestDTLSCertificates(t *testing.T) {
	srv := startBroker(t, nil)
	u := endpointOf(t, srv, "coaps")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	c, err := client.Dial(ctx, u, client.Options{CAFile: srv.CAFile(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Publish(ctx, "cert/t", []byte("x"), client.PublishOptions{QoS: 1})
	wait(t, r, err)
	if _, err := client.Dial(ctx, u, client.Options{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("dial without the CA: want a certificate error, got %v", err)
	}
}

// TestDTLSResumption: with a session file, the second coaps:// connection
// resumes its DTLS session (ConnectionInfo.TLSResumed, handshake timings
// set) with PSK and with certificates; the broker keeps the PSK identity
// of the resumed session for its ACL (dev2 may read dev1/# but not write
// it; anonymous clients are refused altogether).
func TestDTLSResumption(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("user dev1\ntopic readwrite dev1/#\nuser dev2\ntopic read dev1/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startBroker(t, func(o *broker.Options) {
		o.Auth.ACLFile = acl
		f := false
		o.Auth.AllowAnonymous = &f
	})
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		o    client.Options
	}{
		{"psk", client.Options{Username: "dev2", Password: "secret"}},
		{"cert", client.Options{Username: "", Password: ""}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			o := mode.o
			o.SessionCacheFile = filepath.Join(t.TempDir(), "sessions")
			u := endpointOf(t, srv, "coaps")
			for i := range 2 {
				dctx, cancel := context.WithTimeout(ctx, testutil.Scale(20*time.Second))
				o.CAFile, o.ServerName = srv.CAFile(), "127.0.0.1"
				c, err := client.Dial(dctx, u, o)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				info := c.ConnectionInfo()
				if info.TLSResumed != (i == 1) {
					t.Fatalf("connection %d: tls_resumed %v", i+1, info.TLSResumed)
				}
				if !info.DialStart.Before(info.TransportReady) || info.Connack.Before(info.TransportReady) {
					t.Fatalf("connection %d: timings dial %v, DTLS ready %v, ping answered %v", i+1, info.DialStart, info.TransportReady, info.Connack)
				}
				t.Logf("connection %d: resumed %v, DTLS handshake %v, first answer %v", i+1, info.TLSResumed,
					info.TransportReady.Sub(info.DialStart), info.Connack.Sub(info.DialStart))
				if mode.name == "psk" {
					// Reading is allowed for dev2 (an anonymous client would be refused) ...
					if err := c.Subscribe(ctx, "dev1/r", client.SubscribeOptions{QoS: 1}, func(client.Message) {}); err != nil {
						t.Fatalf("connection %d: dev2 may read dev1/#: %v", i+1, err)
					}
					// ... writing is not.
					r, err := c.Publish(ctx, "dev1/r", []byte("no"), client.PublishOptions{QoS: 1})
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Wait(ctx); err == nil || !strings.Contains(err.Error(), "Forbidden") {
						t.Fatalf("connection %d: dev2 may not write dev1/#: want 4.03, got %v", i+1, err)
					}
				} else {
					r, err := c.Publish(ctx, "cert/r", []byte("x"), client.PublishOptions{QoS: 1})
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Wait(ctx); err == nil || !strings.Contains(err.Error(), "Forbidden") {
						// anonymous certificate clients are refused here (allow_anonymous false)
						t.Fatalf("connection %d: anonymous certificate client: want 4.03, got %v", i+1, err)
					}
				}
				_ = c.Close()
			}
		})
	}
	if n := metric(t, srv, `iotq_broker_coap_dtls_handshakes_total{kind="resumed"}`); n != 2 {
		t.Errorf("broker counted %g resumed DTLS handshakes, want 2 (one per mode)", n)
	}
}
