package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// isolationAuth writes a password file (alice, bob) and an ACL that gives
// each user their own home/USER/# and lets bob's publisher write bob's
// topics, and returns the auth options.
func isolationAuth(t *testing.T) broker.AuthOptions {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	for _, up := range [][2]string{{"alice", "wonder"}, {"bob", "builder"}} {
		if err := broker.SetPassword(pw, up[0], []byte(up[1])); err != nil {
			t.Fatal(err)
		}
	}
	acl := filepath.Join(dir, "acl")
	if err := os.WriteFile(acl, []byte("user *\ntopic readwrite home/%u/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	no := false
	return broker.AuthOptions{PasswordFile: pw, ACLFile: acl, AllowAnonymous: &no}
}

// v3Conn is the outcome of an MQTT 3.1.1 CONNECT by paho.mqtt.golang.
type v3Conn struct {
	c              pahov3.Client
	code           byte // CONNACK return code
	sessionPresent bool
	err            error
}

// v3Try connects like v3Client but reports a refusal instead of failing.
func v3Try(t *testing.T, srv *broker.Server, rawURL, id, user, pass string, edit func(*pahov3.ClientOptions)) v3Conn {
	t.Helper()
	o := pahov3.NewClientOptions().AddBroker("tcp://placeholder:1").SetClientID(id).
		SetUsername(user).SetPassword(pass).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(testutil.Scale(10 * time.Second)).SetOrderMatters(true).
		SetCustomOpenConnectionFn(func(*url.URL, pahov3.ClientOptions) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
			defer cancel()
			return transport.Dial(ctx, rawURL, transport.DialOptions{TLSConfig: clientTLS(t, srv)})
		})
	if edit != nil {
		edit(o)
	}
	c := pahov3.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(testutil.Scale(15 * time.Second)) {
		t.Fatalf("connect %s as %s: timeout", rawURL, id)
	}
	ct := tok.(*pahov3.ConnectToken)
	r := v3Conn{c: c, code: ct.ReturnCode(), sessionPresent: ct.SessionPresent(), err: tok.Error()}
	if r.err == nil {
		t.Cleanup(func() { c.Disconnect(100) })
	}
	return r
}

// v5Try connects an MQTT 5 client (paho.golang) with cp and returns the
// CONNACK (nil if none arrived) and the error.
func v5Try(t *testing.T, srv *broker.Server, rawURL string, cp *paho.Connect, box *inbox) (*paho.Client, *paho.Connack, error) {
	t.Helper()
	conn := dial(t, srv, rawURL)
	cfg := paho.ClientConfig{ClientID: cp.ClientID, Conn: pahopackets.NewThreadSafeConn(conn)}
	if box != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			box.add(msg{pr.Packet.Topic, string(pr.Packet.Payload), pr.Packet.QoS, pr.Packet.Retain})
			return true, nil
		}}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	ca, err := c.Connect(ctx, cp)
	if err == nil {
		t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	} else {
		_ = conn.Close()
	}
	return c, ca, err
}

func v5Creds(cp *paho.Connect, user, pass string) *paho.Connect {
	cp.Username, cp.UsernameFlag = user, true
	cp.Password, cp.PasswordFlag = []byte(pass), true
	if cp.KeepAlive == 0 {
		cp.KeepAlive = 30
	}
	return cp
}

// TestWillTopicACL: a Will on a topic the user may not write refuses the
// CONNECT ("not authorized"), so the Will can never be published; a Will on
// an allowed topic is accepted and published when the connection drops.
func TestWillTopicACL(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Auth: isolationAuth(t)})
	u := brokertest.Endpoint(t, srv, "mqtt")
	bobBox := newInbox()
	bob := v3Try(t, srv, u, "bob-watch", "bob", "builder", nil)
	if bob.err != nil {
		t.Fatal(bob.err)
	}
	wait(t, bob.c.Subscribe("home/bob/#", 1, bobBox.v3Handler()), "bob subscribe")

	t.Run("v3", func(t *testing.T) {
		r := v3Try(t, srv, u, "alice-v3", "alice", "wonder", func(o *pahov3.ClientOptions) {
			o.SetWill("home/bob/will", "alice was here", 1, false)
		})
		if r.err == nil || r.code != 5 {
			t.Fatalf("CONNECT with a Will on home/bob/will: code %d err %v, want refusal with return code 5 (not authorized)", r.code, r.err)
		}
	})
	t.Run("v5", func(t *testing.T) {
		_, ca, err := v5Try(t, srv, u, v5Creds(&paho.Connect{ClientID: "alice-v5", CleanStart: true, WillMessage: &paho.WillMessage{Topic: "home/bob/will", Payload: []byte("alice was here"), QoS: 1}}, "alice", "wonder"), nil)
		if err == nil || ca == nil || ca.ReasonCode != 0x87 {
			t.Fatalf("CONNECT with a Will on home/bob/will: connack %+v err %v, want reason 0x87 (not authorized)", ca, err)
		}
	})
	t.Run("allowed will is published", func(t *testing.T) {
		// bob's own Will on his topic is accepted; closing the socket
		// without DISCONNECT publishes it. This proves the check above
		// refused a Will that would have been delivered.
		var raw net.Conn
		o := pahov3.NewClientOptions().AddBroker("tcp://placeholder:1").SetClientID("bob-will").
			SetUsername("bob").SetPassword("builder").SetAutoReconnect(false).
			SetWill("home/bob/will", "bob fell", 1, false).
			SetCustomOpenConnectionFn(func(*url.URL, pahov3.ClientOptions) (net.Conn, error) {
				raw = dial(t, srv, u)
				return raw, nil
			})
		c := pahov3.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(testutil.Scale(10*time.Second)) || tok.Error() != nil {
			t.Fatalf("bob with an allowed Will: %v", tok.Error())
		}
		_ = raw.Close()
		got := bobBox.waitN(t, 1, 10*time.Second)
		for _, m := range got {
			if m.payload != "bob fell" {
				t.Errorf("bob received %q on %s: only his own Will should arrive", m.payload, m.topic)
			}
		}
		c.Disconnect(0)
	})
}

// TestClientIDBelongsToItsUser: alice cannot take over bob's persistent
// session (or wipe it with a clean session) by connecting with bob's client
// identifier, before or after a restart; bob keeps his queued messages.
func TestClientIDBelongsToItsUser(t *testing.T) {
	for _, version := range []string{"3.1.1", "5"} {
		t.Run("v"+version, func(t *testing.T) {
			opts := broker.Options{Auth: isolationAuth(t), StateDir: t.TempDir()}
			srv := brokertest.Start(t, opts)
			u := brokertest.Endpoint(t, srv, "mqtt")
			id := "bob-device-" + version
			var disconnect func()
			connect := func(srv *broker.Server, u, user, pass string, clean bool, box *inbox) (ok bool, code byte, present bool) {
				t.Helper()
				if version == "3.1.1" {
					r := v3Try(t, srv, u, id, user, pass, func(o *pahov3.ClientOptions) {
						o.SetCleanSession(clean)
						if box != nil {
							o.SetDefaultPublishHandler(box.v3Handler())
						}
					})
					if r.err == nil && box != nil && !r.sessionPresent {
						wait(t, r.c.Subscribe("home/bob/q", 1, box.v3Handler()), "subscribe")
					}
					disconnect = func() { r.c.Disconnect(100) }
					return r.err == nil, r.code, r.sessionPresent
				}
				cp := v5Creds(&paho.Connect{ClientID: id, CleanStart: clean, Properties: &paho.ConnectProperties{SessionExpiryInterval: paho.Uint32(3600)}}, user, pass)
				c, ca, err := v5Try(t, srv, u, cp, box)
				if ca == nil {
					t.Fatalf("no CONNACK: %v", err)
				}
				// A resumed session keeps its subscription (and
				// subscribing again could collide with the identifiers
				// of the messages being resent: mochi shares one
				// identifier space between directions).
				if err == nil && box != nil && !ca.SessionPresent {
					if sa, err := c.Subscribe(ctxT(t), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "home/bob/q", QoS: 1}}}); err != nil {
						t.Fatalf("subscribe: %v %+v", err, sa)
					}
				}
				disconnect = func() { _ = c.Disconnect(&paho.Disconnect{}) }
				return err == nil, ca.ReasonCode, ca.SessionPresent
			}

			// bob creates a persistent session with a subscription.
			if ok, code, _ := connect(srv, u, "bob", "builder", false, newInbox()); !ok {
				t.Fatalf("bob refused: %d", code)
			}
			disconnect()
			pub := v3Try(t, srv, u, "bob-pub", "bob", "builder", nil)
			if pub.err != nil {
				t.Fatal(pub.err)
			}
			for i := range 3 {
				wait(t, pub.c.Publish("home/bob/q", 1, false, fmt.Sprintf("m%d", i)), "publish")
			}
			pub.c.Disconnect(100)

			wantRefused := byte(5)
			if version == "5" {
				wantRefused = 0x87
			}
			refusedAlice := func(stage string) {
				t.Helper()
				for _, clean := range []bool{false, true} {
					ok, code, present := connect(srv, u, "alice", "wonder", clean, nil)
					if ok {
						disconnect()
					}
					if ok || code != wantRefused || present {
						t.Fatalf("%s: alice with bob's client id (clean=%v): accepted=%v code=%#x session present=%v; want refused with %#x", stage, clean, ok, code, present, wantRefused)
					}
				}
			}
			refusedAlice("before restart")

			// The owner is stored with the session.
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
			srv = brokertest.Start(t, opts)
			u = brokertest.Endpoint(t, srv, "mqtt")
			refusedAlice("after restart")

			box := newInbox()
			ok, code, present := connect(srv, u, "bob", "builder", false, box)
			if !ok || !present {
				t.Fatalf("bob back: accepted=%v code=%#x session present=%v", ok, code, present)
			}
			got := box.waitN(t, 3, 10*time.Second)
			seen := map[string]bool{}
			for _, m := range got {
				seen[m.payload] = true
			}
			for i := range 3 {
				if !seen[fmt.Sprintf("m%d", i)] {
					t.Errorf("bob lost m%d; got %v", i, got)
				}
			}
		})
	}
}

// TestClientIDLength: a client identifier over the limit is refused with a
// clear CONNACK (3.1.1: identifier rejected; 5: 0x85 with a reason string);
// one at the limit is accepted.
func TestClientIDLength(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	u := brokertest.Endpoint(t, srv, "mqtt")
	long := strings.Repeat("x", 40000)
	if r := v3Try(t, srv, u, long, "", "", nil); r.err == nil || r.code != 2 {
		t.Errorf("v3 40000-byte client id: code %d err %v, want return code 2 (identifier rejected)", r.code, r.err)
	}
	_, ca, err := v5Try(t, srv, u, &paho.Connect{ClientID: long, CleanStart: true, KeepAlive: 30}, nil)
	if err == nil || ca == nil || ca.ReasonCode != 0x85 {
		t.Fatalf("v5 40000-byte client id: connack %+v err %v, want 0x85", ca, err)
	}
	if ca.Properties == nil || !strings.Contains(ca.Properties.ReasonString, "limit is 256") {
		t.Errorf("v5 reason string %+v does not name the limit", ca.Properties)
	}
	at := strings.Repeat("y", broker.DefaultMaxClientIDLen)
	if r := v3Try(t, srv, u, at, "", "", nil); r.err != nil {
		t.Errorf("v3 client id of exactly %d bytes refused: %v", len(at), r.err)
	}
	if _, _, err := v5Try(t, srv, u, &paho.Connect{ClientID: at, CleanStart: true, KeepAlive: 30}, nil); err != nil {
		t.Errorf("v5 client id of exactly %d bytes refused: %v", len(at), err)
	}
}

// TestHugeClientIDDoesNotSpoilOthersStore: with the limit raised, a client
// whose id is too long for a store key keeps its messages in memory only,
// and another client's 100 queued messages survive a graceful restart (they
// shared write batches with the bad records).
func TestHugeClientIDDoesNotSpoilOthersStore(t *testing.T) {
	opts := broker.Options{StateDir: t.TempDir(), Limits: broker.LimitsOptions{MaxClientIDLength: 65535}}
	srv := brokertest.Start(t, opts)
	u := brokertest.Endpoint(t, srv, "mqtt")
	persistent := func(o *pahov3.ClientOptions) { o.SetCleanSession(false) }
	for _, id := range []string{strings.Repeat("h", 40000), "small"} {
		r := v3Try(t, srv, u, id, "", "", persistent)
		if r.err != nil {
			t.Fatalf("connect %d-byte id: %v", len(id), r.err)
		}
		wait(t, r.c.Subscribe("q/t", 1, nil), "subscribe")
		r.c.Disconnect(100)
	}
	pub := v3Client(t, srv, u, "pub", nil)
	for i := range 100 {
		// Not waiting for each PUBACK keeps both subscribers' records in
		// the same write batches.
		tok := pub.Publish("q/t", 1, false, fmt.Sprintf("m%d", i))
		if i == 99 {
			wait(t, tok, "publish")
		}
	}
	pub.Disconnect(100)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv = brokertest.Start(t, opts)
	u = brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	r := v3Try(t, srv, u, "small", "", "", func(o *pahov3.ClientOptions) {
		o.SetCleanSession(false).SetDefaultPublishHandler(box.v3Handler())
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := box.waitN(t, 100, 20*time.Second)
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.payload] = true
	}
	if len(seen) != 100 {
		t.Fatalf("small got %d distinct of 100 queued messages after restart", len(seen))
	}
}

// metricsText returns srv's /metrics page.
func metricsText(t *testing.T, srv *broker.Server) string {
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
	return string(b)
}

// TestSubscriptionLimit: a client gets at most limits.max_subscriptions
// subscriptions; one more is refused (MQTT 5: 0x97, 3.1.1: 0x80) and
// counted; resubscribing to an existing filter still works.
func TestSubscriptionLimit(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Limits: broker.LimitsOptions{MaxSubscriptions: 3}, Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	c := v5Client(t, srv, u, "many5", nil)
	var subs []paho.SubscribeOptions
	for i := range 4 {
		subs = append(subs, paho.SubscribeOptions{Topic: fmt.Sprintf("s/%d", i), QoS: 1})
	}
	sa, err := c.Subscribe(ctxT(t), &paho.Subscribe{Subscriptions: subs})
	if sa == nil {
		t.Fatalf("no SUBACK: %v", err)
	}
	if want := []byte{1, 1, 1, 0x97}; !bytes.Equal(sa.Reasons, want) {
		t.Fatalf("v5 SUBACK reasons %v, want %v (the fourth over the limit: 0x97)", sa.Reasons, want)
	}
	sa, err = c.Subscribe(ctxT(t), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "s/0", QoS: 0}}})
	if err != nil || !bytes.Equal(sa.Reasons, []byte{0}) {
		t.Fatalf("resubscribing to an existing filter: %v %+v", err, sa)
	}

	v3 := v3Client(t, srv, u, "many3", nil)
	tok := v3.SubscribeMultiple(map[string]byte{"t/0": 1, "t/1": 1, "t/2": 1, "t/3": 1}, nil)
	if !tok.WaitTimeout(testutil.Scale(10 * time.Second)) {
		t.Fatal("v3 subscribe: timeout")
	}
	refused := 0
	for _, code := range tok.(*pahov3.SubscribeToken).Result() {
		if code == 0x80 {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("v3 SUBACK %v: want exactly one 0x80", tok.(*pahov3.SubscribeToken).Result())
	}
	if v := metricValue(metricsText(t, srv), `iotq_broker_refused_total{kind="subscription_limit"}`); v != 2 {
		t.Fatalf("refused_total{kind=subscription_limit} = %v, want 2", v)
	}
}

// TestInflightFullDropsAreCounted: QoS 1 messages that do not fit an
// offline session's in-flight store (flow.max_inflight) are counted by
// reason, not only in the engine's total.
func TestInflightFullDropsAreCounted(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{MaxInflight: 5}, Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	sub := v3Client(t, srv, u, "offline", func(o *pahov3.ClientOptions) { o.SetCleanSession(false) })
	wait(t, sub.Subscribe("full/q", 1, nil), "subscribe")
	sub.Disconnect(100)
	pub := v3Client(t, srv, u, "pub", nil)
	for i := range 8 {
		wait(t, pub.Publish("full/q", 1, false, fmt.Sprint(i)), "publish")
	}
	// The drop may be counted just after the PUBACK went out.
	testutil.Eventually(t, 5*time.Second, func() error {
		text := metricsText(t, srv)
		if v := metricValue(text, `iotq_broker_messages_dropped_total{qos="1",reason="inflight_full"}`); v != 3 {
			return notYet(`messages_dropped_total{reason="inflight_full",qos="1"} = %v, want 3`, v)
		}
		return nil
	})
}

// TestPublishACLRefusalsCounted: PUBLISH packets to a topic the ACL does
// not let the client write are not delivered and are counted in
// refused_total{kind="publish_acl"} (the drop of a refused QoS 0 message is
// otherwise silent).
func TestPublishACLRefusalsCounted(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Auth: isolationAuth(t), Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	bob := v3Try(t, srv, u, "bob-sub", "bob", "builder", nil)
	if bob.err != nil {
		t.Fatal(bob.err)
	}
	defer bob.c.Disconnect(100)
	wait(t, bob.c.Subscribe("home/bob/#", 0, box.v3Handler()), "subscribe")
	alice := v3Try(t, srv, u, "alice-pub", "alice", "wonder", nil)
	if alice.err != nil {
		t.Fatal(alice.err)
	}
	defer alice.c.Disconnect(100)
	for range 3 {
		wait(t, alice.c.Publish("home/bob/inbox", 0, false, "not yours"), "publish")
	}
	// bob's own message, published after alice's: once it arrived, the
	// broker has processed alice's (if they had been delivered, they would
	// be in the inbox: the test fails below).
	wait(t, alice.c.Publish("home/alice/x", 0, false, "own"), "publish own")
	bobPub := v3Try(t, srv, u, "bob-pub", "bob", "builder", nil)
	if bobPub.err != nil {
		t.Fatal(bobPub.err)
	}
	defer bobPub.c.Disconnect(100)
	wait(t, bobPub.c.Publish("home/bob/inbox", 1, false, "mine"), "publish")
	got := box.waitN(t, 1, 10*time.Second)
	if len(got) != 1 || got[0].payload != "mine" {
		t.Fatalf("bob received %v, want only his own message", got)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if v := metricValue(metricsText(t, srv), `iotq_broker_refused_total{kind="publish_acl"}`); v != 3 {
			return notYet(`refused_total{kind="publish_acl"} = %v, want 3`, v)
		}
		return nil
	})
}
