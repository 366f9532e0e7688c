package coap_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
)

// BenchmarkPublishToNotification measures one message in flight: publish
// (QoS 1: CON over UDP/DTLS) and wait until the observer (MQTT: the
// subscriber) has it, per transport, through the same broker. Reported:
// p50 and p99 of the publish-to-delivery time, and msg/s.
//
//	go test -run '^$' -bench PublishToNotification -benchtime 3000x ./client/coap/
func BenchmarkPublishToNotification(b *testing.B) {
	for _, scheme := range []string{"mqtt", "coap", "coaps", "coap+tcp", "coaps+tcp", "coap+quic", "libcoap-server/coap"} {
		b.Run(scheme, func(b *testing.B) {
			var sub, pub client.Client
			if scheme == "libcoap-server/coap" {
				// Reference: libcoap's coap-server (-d: resources created by
				// PUT, observable) instead of our broker.
				u := startLibcoapServer(b)
				sub, pub = dialURL(b, u), dialURL(b, u)
			} else {
				srv := startBrokerTB(b)
				sub, pub = dialTB(b, srv, scheme), dialTB(b, srv, scheme)
			}
			ctx := context.Background()
			got := make(chan struct{}, 1)
			topic := fmt.Sprintf("bench%d", time.Now().UnixNano()%1000000)
			if r, err := pub.Publish(ctx, topic, []byte("init"), client.PublishOptions{QoS: 1}); err != nil || r.Wait(ctx) != nil {
				b.Fatalf("first publication: %v", err)
			}
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, func(client.Message) { got <- struct{}{} }); err != nil {
				b.Fatal(err)
			}
			select { // the current value ("init") arrives first on CoAP
			case <-got:
			case <-time.After(time.Second):
			}
			payload := make([]byte, 60)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				payload[0] = byte(i)
				t0 := time.Now()
				r, err := pub.Publish(ctx, topic, payload, client.PublishOptions{QoS: 1})
				if err != nil {
					b.Fatal(err)
				}
				select {
				case <-got:
				case <-time.After(10 * time.Second):
					b.Fatalf("message %d not delivered in 10s", i)
				}
				lat = append(lat, time.Since(t0))
				if err := r.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
			b.ReportMetric(float64(b.N)/el.Seconds(), "msg/s")
		})
	}
}

func startLibcoapServer(b *testing.B) string {
	bin := needTool(b, "coap-server-openssl")
	port := freePort(b)
	cmd := exec.Command(bin, "-A", "127.0.0.1", "-p", fmt.Sprint(port), "-d", "10")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return fmt.Sprintf("coap://127.0.0.1:%d", port)
}

func dialURL(b *testing.B, u string) client.Client {
	var c client.Client
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var err error
		c, err = client.Dial(ctx, u, client.Options{})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}
