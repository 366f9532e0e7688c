package mqtt_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/mqtt"
	"github.com/iotq/iotq/transport/endpoint"
)

// Connection migration (docs/mqtt-quic.md): a publisher's address changes
// in the middle of a run of QoS 1 messages. Over QUIC the connection and
// its MQTT session go on (the broker accepted no new connection, the
// client never lost its own), and every message arrives once; over TCP the
// connection breaks and the client has to reconnect.

const migrateMsgs = 100 // QoS 1 messages per run, half before the change

// TestQUICRebindKeepsSession: NAT rebinding. The publisher talks to the
// broker through a UDP relay that, halfway through, starts sending the
// client's packets from a new source port, as a NAT that lost its mapping
// does. The broker validates the new path and answers there.
func TestQUICRebindKeepsSession(t *testing.T) {
	for _, v := range []int{client.ProtocolMQTT311, client.ProtocolMQTT5} {
		t.Run(fmt.Sprintf("mqtt%d", v), func(t *testing.T) {
			srv := migrateBroker(t)
			r := startUDPRelay(t, udpAddrOf(t, srv, "quic"))
			runAcrossChange(t, srv, "quic", "quic://"+r.addr(), v, func(ctx context.Context, pub client.Client) {
				r.rebind(t)
			})
			// The relay did send from the new port, and the broker answered
			// there: the session really went over the new path.
			if out, in := r.sentNew.Load(), r.recvNew.Load(); out == 0 || in == 0 {
				t.Fatalf("relay after rebinding: sent %d and received %d packets on the new port, want both > 0", out, in)
			}
		})
	}
}

// TestQUICMigrateKeepsSession: the client moves its connection to a
// socket on another address (127.0.0.2) with mqtt.Migrate.
func TestQUICMigrateKeepsSession(t *testing.T) {
	for _, v := range []int{client.ProtocolMQTT311, client.ProtocolMQTT5} {
		t.Run(fmt.Sprintf("mqtt%d", v), func(t *testing.T) {
			srv := migrateBroker(t)
			runAcrossChange(t, srv, "quic", brokertest.Endpoint(t, srv, "quic"), v, func(ctx context.Context, pub client.Client) {
				if err := mqtt.Migrate(ctx, pub, "127.0.0.2:0"); err != nil {
					t.Fatalf("migrate: %v", err)
				}
			})
		})
	}
}

// TestTCPRebindBreaksConnection: the same change of source port under MQTT
// over TCP. A TCP connection is its address pair, so what the broker gets
// from the new port is a new connection that starts in the middle of an
// MQTT stream; it refuses it, and the client loses its connection.
func TestTCPRebindBreaksConnection(t *testing.T) {
	srv := migrateBroker(t)
	r := startTCPRelay(t, tcpAddrOf(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub := dialMigrate(t, srv, "mqtt://"+r.ln.Addr().String(), client.ProtocolMQTT5)
	for i := range 5 {
		rc, err := pub.Publish(ctx, "m/tcp", []byte(strconv.Itoa(i)), client.PublishOptions{QoS: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Wait(ctx); err != nil {
			t.Fatalf("before rebinding: %v", err)
		}
	}
	if err := mqtt.Migrate(ctx, pub, "127.0.0.2:0"); err == nil {
		t.Fatal("Migrate of an MQTT-over-TCP client succeeded")
	}
	r.rebind()
	var failed bool
	for i := range 5 {
		rc, err := pub.Publish(ctx, "m/tcp", []byte(strconv.Itoa(i)), client.PublishOptions{QoS: 1})
		if err != nil {
			failed = true
			break
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		err = rc.Wait(wctx)
		wcancel()
		if err != nil {
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("QoS 1 publishes after the TCP rebinding were all acknowledged")
	}
	select {
	case <-pub.Done():
	case <-ctx.Done():
		t.Fatal("the client's TCP connection survived the rebinding")
	}
	if err := pub.Err(); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("client ended with %v, want ErrConnectionLost", err)
	}
	if n := connsTotal(t, srv, "mqtt"); n < 2 {
		t.Fatalf("broker counted %v TCP connections, want at least 2 (the client's and the relay's new one)", n)
	}
}

// runAcrossChange publishes migrateMsgs QoS 1 messages through url, calls
// change halfway without waiting for the acknowledgements in flight, and
// checks that every message was acknowledged and delivered exactly once,
// in order, that the client never lost its connection and that the broker
// accepted exactly two connections (subscriber and publisher) on scheme.
func runAcrossChange(t *testing.T, srv *broker.Server, scheme, url string, v int, change func(context.Context, client.Client)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := dialMigrate(t, srv, brokertest.Endpoint(t, srv, scheme), v)
	var (
		mu  sync.Mutex
		got []string
	)
	all := make(chan struct{})
	if err := sub.Subscribe(ctx, "m/#", client.SubscribeOptions{QoS: 1}, func(m client.Message) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(m.Payload))
		if len(got) == migrateMsgs {
			close(all)
		}
	}); err != nil {
		t.Fatal(err)
	}
	pub := dialMigrate(t, srv, url, v)
	var rcs []*client.Receipt
	for i := range migrateMsgs {
		if i == migrateMsgs/2 {
			change(ctx, pub)
		}
		rc, err := pub.Publish(ctx, "m/x", []byte(strconv.Itoa(i)), client.PublishOptions{QoS: 1})
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		rcs = append(rcs, rc)
	}
	for i, rc := range rcs {
		if err := rc.Wait(ctx); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("subscriber got %d of %d messages", len(got), migrateMsgs)
	}
	// Duplicates would come after the originals: give them a moment.
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	for i, p := range got {
		if p != strconv.Itoa(i) {
			mu.Unlock()
			t.Fatalf("message %d is %q: want each message once and in order, got %v", i, p, got)
		}
	}
	if len(got) != migrateMsgs {
		mu.Unlock()
		t.Fatalf("subscriber got %d messages, want %d (duplicates)", len(got), migrateMsgs)
	}
	mu.Unlock()
	select {
	case <-pub.Done():
		t.Fatalf("publisher lost its connection: %v", pub.Err())
	default:
	}
	if n := connsTotal(t, srv, scheme); n != 2 {
		t.Fatalf("broker accepted %v %s connections, want 2 (no reconnect)", n, scheme)
	}
}

func migrateBroker(t *testing.T) *broker.Server {
	t.Helper()
	return brokertest.Start(t, broker.Options{
		Listen:   []string{"mqtt://127.0.0.1:0", "quic://127.0.0.1:0"},
		Metrics:  "127.0.0.1:0",
		StateDir: t.TempDir(), Store: broker.StoreNone,
	})
}

func dialMigrate(t *testing.T, srv *broker.Server, url string, v int) client.Client {
	t.Helper()
	ep, err := endpoint.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mqtt.Dial(ctx, ep, client.Options{ProtocolVersion: v, CAFile: srv.CAFile()})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var connsRe = regexp.MustCompile(`(?m)^iotq_broker_connections_total\{transport="([a-z]+)"\} ([0-9.e+]+)$`)

// connsTotal reads the broker's count of accepted connections on scheme.
func connsTotal(t *testing.T, srv *broker.Server, scheme string) float64 {
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
	for _, m := range connsRe.FindAllStringSubmatch(string(b), -1) {
		if m[1] == scheme {
			n, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no iotq_broker_connections_total for %s in the broker's metrics", scheme)
	return 0
}
