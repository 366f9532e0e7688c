package client_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
)

// BenchmarkPublishOneInFlight measures our client against our broker per
// transport, protocol and QoS with one message in flight: publish, wait until
// the subscriber has it (and, for QoS 1, until the receipt is accepted),
// repeat. ns/op is the time per message; p50/p99 are one-way delays
// (publish call to subscriber handler). Run:
//
//	go test -run '^$' -bench PublishOneInFlight -benchtime 2000x ./client/
func BenchmarkPublishOneInFlight(b *testing.B) {
	srv, urls := startBroker(b)
	for _, scheme := range []string{"mqtt", "mqtts", "ws", "quic"} {
		for _, proto := range []int{3, 5} {
			for _, qos := range []byte{0, 1} {
				b.Run(fmt.Sprintf("transport=%s/mqtt=%d/qos=%d", scheme, proto, qos), func(b *testing.B) {
					ctx := context.Background()
					o := client.Options{ProtocolVersion: proto, CAFile: srv.CAFile()}
					sub := dial(b, urls[scheme], o)
					recv := make(chan time.Time, 1)
					topic := fmt.Sprintf("bench/%s/%d/%d", scheme, proto, qos)
					if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: qos}, func(m client.Message) {
						recv <- m.Received
					}); err != nil {
						b.Fatal(err)
					}
					pub := dial(b, urls[scheme], o)
					delays := make([]time.Duration, 0, b.N)
					payload := make([]byte, 100)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						start := time.Now()
						r, err := pub.Publish(ctx, topic, payload, client.PublishOptions{QoS: qos})
						if err != nil {
							b.Fatal(err)
						}
						select {
						case at := <-recv:
							delays = append(delays, at.Sub(start))
						case <-time.After(10 * time.Second):
							b.Fatalf("message %d not delivered", i)
						}
						if err := r.Wait(ctx); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
					b.ReportMetric(float64(delays[len(delays)/2].Nanoseconds())/1e3, "p50-us")
					b.ReportMetric(float64(delays[len(delays)*99/100].Nanoseconds())/1e3, "p99-us")
				})
			}
		}
	}
}
