package broker_test

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
)

// TestTransportMatrix runs the same publish/subscribe cases over every
// transport the broker serves, with MQTT 3.1.1 and 5.
func TestTransportMatrix(t *testing.T) {
	srv, schemes := startMatrixBroker(t, broker.Options{})
	for i, scheme := range schemes {
		u := srv.Endpoints()[i]
		t.Run(scheme, func(t *testing.T) {
			t.Run("v3 delivers QoS 0, 1 and 2 in order", func(t *testing.T) {
				box := newInbox()
				sub := v3Client(t, srv, u, "sub3-"+scheme, nil)
				topic := "m/" + scheme + "/v3"
				wait(t, sub.Subscribe(topic, 2, box.v3Handler()), "subscribe")
				pub := v3Client(t, srv, u, "pub3-"+scheme, nil)
				for q := byte(0); q <= 2; q++ {
					for i := 0; i < 5; i++ {
						wait(t, pub.Publish(topic, q, false, fmt.Sprintf("q%d-%d", q, i)), "publish")
					}
				}
				got := box.waitN(t, 15, 10*time.Second)
				for i, m := range got {
					want := fmt.Sprintf("q%d-%d", i/5, i%5)
					if m.payload != want || m.qos != byte(i/5) || m.retained {
						t.Errorf("message %d = %+v, want payload %q qos %d not retained", i, m, want, i/5)
					}
				}
			})
			t.Run("v3 retained message reaches a later subscriber", func(t *testing.T) {
				topic := "r/" + scheme
				pub := v3Client(t, srv, u, "rpub-"+scheme, nil)
				wait(t, pub.Publish(topic, 1, true, "kept"), "publish retained")
				box := newInbox()
				sub := v3Client(t, srv, u, "rsub-"+scheme, nil)
				wait(t, sub.Subscribe(topic, 1, box.v3Handler()), "subscribe")
				// The publish may still be fanning out when the subscriber
				// arrives: then a live copy comes first (retain flag clear)
				// and the retained copy follows.
				got := box.waitN(t, 1, 10*time.Second)
				if !got[0].retained {
					got = box.waitN(t, 2, 10*time.Second)[1:]
				}
				if got[0].payload != "kept" || !got[0].retained {
					t.Fatalf("got %+v, want retained \"kept\"", got[0])
				}
			})
			t.Run("v3 will is published when a client vanishes", func(t *testing.T) {
				topic := "w/" + scheme
				box := newInbox()
				sub := v3Client(t, srv, u, "wsub-"+scheme, nil)
				wait(t, sub.Subscribe(topic, 1, box.v3Handler()), "subscribe")
				var raw net.Conn
				dying := v3Client(t, srv, u, "will-"+scheme, func(o *pahov3.ClientOptions) {
					o.SetWill(topic, "gone", 1, false)
					inner := o.CustomOpenConnectionFn
					o.SetCustomOpenConnectionFn(func(uu *url.URL, oo pahov3.ClientOptions) (net.Conn, error) {
						c, err := inner(uu, oo)
						raw = c
						return c, err
					})
				})
				_ = dying
				_ = raw.Close() // no DISCONNECT: the broker must send the will
				got := box.waitN(t, 1, 10*time.Second)
				if got[0].payload != "gone" {
					t.Fatalf("got %+v, want will \"gone\"", got[0])
				}
			})
			t.Run("v5 delivers QoS 0, 1 and 2 and retained", func(t *testing.T) {
				box := newInbox()
				sub := v5Client(t, srv, u, "sub5-"+scheme, box)
				topic := "m/" + scheme + "/v5"
				if _, err := sub.Subscribe(ctxT(t), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 2}}}); err != nil {
					t.Fatal(err)
				}
				pub := v5Client(t, srv, u, "pub5-"+scheme, nil)
				for q := byte(0); q <= 2; q++ {
					if _, err := pub.Publish(ctxT(t), &paho.Publish{Topic: topic, QoS: q, Payload: []byte(fmt.Sprintf("v5-%d", q))}); err != nil {
						t.Fatalf("publish qos %d: %v", q, err)
					}
				}
				got := box.waitN(t, 3, 10*time.Second)
				for q, m := range got[:3] {
					if m.payload != fmt.Sprintf("v5-%d", q) || m.qos != byte(q) {
						t.Errorf("message %d = %+v", q, m)
					}
				}
				rtopic := "r5/" + scheme
				if _, err := pub.Publish(ctxT(t), &paho.Publish{Topic: rtopic, QoS: 1, Retain: true, Payload: []byte("kept5")}); err != nil {
					t.Fatal(err)
				}
				box2 := newInbox()
				late := v5Client(t, srv, u, "late5-"+scheme, box2)
				if _, err := late.Subscribe(ctxT(t), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: rtopic, QoS: 1}}}); err != nil {
					t.Fatal(err)
				}
				if g := box2.waitN(t, 1, 10*time.Second); g[0].payload != "kept5" || !g[0].retained {
					t.Fatalf("retained: got %+v", g[0])
				}
			})
		})
	}
}
