package coap_test

import (
	"context"
	"fmt"
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
	for _, scheme := range []string{"mqtt", "coap", "coaps", "coap+tcp", "coaps+tcp", "coap+quic"} {
		b.Run(scheme, func(b *testing.B) {
			srv := startBrokerTB(b)
			sub := dialTB(b, srv, scheme)
			pub := dialTB(b, srv, scheme)
			ctx := context.Background()
			got := make(chan struct{}, 1)
			topic := fmt.Sprintf("bench/%d", time.Now().UnixNano())
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, func(client.Message) { got <- struct{}{} }); err != nil {
				b.Fatal(err)
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
