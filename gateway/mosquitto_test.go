package gateway_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/certs"
	iotqtest "github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// startMosquitto runs a Mosquitto on a free loopback port (stopped by its
// PID in t.Cleanup; under CI=true a missing Mosquitto fails the test) and
// returns its tcp:// address.
func startMosquitto(t testing.TB) string {
	t.Helper()
	return "tcp://" + iotqtest.StartMosquitto(t, "").Addr()
}

// TestMosquittoBehindGateway: MQTT over QUIC to a broker that has no QUIC,
// through the gateway: our client (MQTT 3.1.1 and 5) and plain paho over
// our QUIC transport publish and subscribe; a second connection with the
// saved ticket uses 0-RTT.
func TestMosquittoBehindGateway(t *testing.T) {
	up := startMosquitto(t)
	g, err := gateway.New(gateway.Options{
		Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{up}, ALPN: []string{"mqtt"}}},
		StateDir: t.TempDir(),
		Logger:   iotqtest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw := g.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(60*time.Second))
	defer cancel()

	for _, v := range []int{client.ProtocolMQTT311, client.ProtocolMQTT5} {
		t.Run(fmt.Sprintf("client/v%d", v), func(t *testing.T) {
			cacheFile := filepath.Join(t.TempDir(), "tickets")
			o := client.Options{ProtocolVersion: v, CAFile: g.CAFile(), SessionCacheFile: cacheFile, Logger: iotqtest.Logger(t)}
			sub, err := client.Dial(ctx, gw, o)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			got := make(chan client.Message, 10)
			topic := fmt.Sprintf("gw/v%d", v)
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, func(m client.Message) { got <- m }); err != nil {
				t.Fatal(err)
			}
			// A second process-like client with the ticket file written by
			// the subscriber's connection: 0-RTT.
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			sub, err = client.Dial(ctx, gw, o)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, func(m client.Message) { got <- m }); err != nil {
				t.Fatal(err)
			}
			if info := sub.ConnectionInfo(); !info.Used0RTT || !info.TLSResumed {
				t.Fatalf("second connection: Used0RTT %v TLSResumed %v, want both", info.Used0RTT, info.TLSResumed)
			}
			pub, err := client.Dial(ctx, gw, o)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			r, err := pub.Publish(ctx, topic, []byte("through the gateway"), client.PublishOptions{QoS: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatalf("PUBACK: %v", err)
			}
			select {
			case m := <-got:
				if string(m.Payload) != "through the gateway" {
					t.Fatalf("payload %q", m.Payload)
				}
			case <-ctx.Done():
				t.Fatal("message not delivered")
			}
		})
	}

	t.Run("paho", func(t *testing.T) {
		pool, err := certs.CertPool(g.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		cache := tls.NewLRUClientSessionCache(4)
		var last transport.Conn
		newPaho := func(id string) paho.Client {
			po := paho.NewClientOptions().AddBroker(gw).SetClientID(id).SetAutoReconnect(false)
			po.SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) {
				c, err := transport.Dial(ctx, gw, transport.DialOptions{TLSConfig: &tls.Config{RootCAs: pool}, SessionCache: cache})
				last = c
				return c, err
			})
			c := paho.NewClient(po)
			if tok := c.Connect(); !tok.WaitTimeout(iotqtest.Scale(20*time.Second)) || tok.Error() != nil {
				t.Fatalf("paho connect: %v", tok.Error())
			}
			return c
		}
		got := make(chan string, 1)
		sub := newPaho("gw-paho-sub")
		defer sub.Disconnect(100)
		if tok := sub.Subscribe("gw/paho", 1, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) }); !tok.WaitTimeout(iotqtest.Scale(10*time.Second)) || tok.Error() != nil {
			t.Fatalf("subscribe: %v", tok.Error())
		}
		pub := newPaho("gw-paho-pub") // resumes with the subscriber's ticket
		defer pub.Disconnect(100)
		if !last.Info().Used0RTT {
			t.Errorf("second paho connection did not use 0-RTT: %+v", last.Info())
		}
		if tok := pub.Publish("gw/paho", 1, false, "paho"); !tok.WaitTimeout(iotqtest.Scale(10*time.Second)) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
		select {
		case m := <-got:
			if m != "paho" {
				t.Fatalf("payload %q", m)
			}
		case <-ctx.Done():
			t.Fatal("paho message not delivered")
		}
	})
}
