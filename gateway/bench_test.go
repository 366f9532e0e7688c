package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/gateway"
	iotqtest "github.com/iotq/iotq/internal/testutil"
)

// startGatewayB puts a gateway route with alpn in front of upstream.
func startGatewayB(b *testing.B, upstream, alpn string) *gateway.Gateway {
	b.Helper()
	g, err := gateway.New(gateway.Options{
		Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{upstream}, ALPN: []string{alpn}}},
		StateDir: b.TempDir(),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// BenchmarkGateway compares, on loopback, one publisher and one subscriber
// through: Mosquitto direct (MQTT over TCP), iotq gateway -> Mosquitto
// (MQTT over QUIC), our broker's own QUIC listener, Artemis direct (AMQP
// over TCP) and iotq gateway -> Artemis (AMQP over QUIC).
//
//	latency:    one QoS 1 message in flight, publish to delivery; reports
//	            p50_us and p99_us (msgs/s is 1 / mean round).
//	throughput: QoS 1, up to 64 unacknowledged; reports msgs/s delivered.
//
// Run: go test -run '^$' -bench Gateway -benchtime 2000x ./gateway
func BenchmarkGateway(b *testing.B) {
	type path struct {
		name string
		url  func(b *testing.B) (string, client.Options)
	}
	paths := []path{
		{"mqtt/mosquitto-direct", func(b *testing.B) (string, client.Options) {
			return strings.Replace(startMosquitto(b), "tcp://", "mqtt://", 1), client.Options{}
		}},
		{"mqtt/gateway-mosquitto", func(b *testing.B) (string, client.Options) {
			g := startGatewayB(b, startMosquitto(b), "mqtt")
			return g.Endpoints()[0], client.Options{CAFile: g.CAFile()}
		}},
		{"mqtt/broker-quic", func(b *testing.B) (string, client.Options) {
			srv := brokertest.Start(b, broker.Options{Listen: []string{"quic://127.0.0.1:0"}, StateDir: b.TempDir()})
			return brokertest.Endpoint(b, srv, "quic"), client.Options{CAFile: srv.CAFile()}
		}},
		{"amqp/artemis-direct", func(b *testing.B) (string, client.Options) {
			return iotqtest.StartArtemis(b, false).URL(), client.Options{}
		}},
		{"amqp/gateway-artemis", func(b *testing.B) (string, client.Options) {
			art := iotqtest.StartArtemis(b, false)
			g := startGatewayB(b, strings.Replace(art.URL(), "amqp://", "tcp://", 1), "amqp")
			return strings.Replace(g.Endpoints()[0], "quic://", "amqp+quic://", 1), client.Options{CAFile: g.CAFile()}
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			url, o := p.url(b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			sub, err := client.Dial(ctx, url, o)
			if err != nil {
				b.Fatal(err)
			}
			defer sub.Close()
			pub, err := client.Dial(ctx, url, o)
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			got := make(chan time.Time, 1024)
			topic := "bench.gw"
			if err := sub.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, func(m client.Message) { got <- m.Received }); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 100)
			// Warm up (JIT of the Java broker, QUIC windows).
			for range 200 {
				r, err := pub.Publish(ctx, topic, payload, client.PublishOptions{QoS: 1})
				if err != nil {
					b.Fatal(err)
				}
				_ = r.Wait(ctx)
				<-got
			}
			b.Run("latency", func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					if _, err := pub.Publish(ctx, topic, payload, client.PublishOptions{QoS: 1}); err != nil {
						b.Fatal(err)
					}
					select {
					case at := <-got:
						lat = append(lat, at.Sub(start))
					case <-ctx.Done():
						b.Fatal("message not delivered")
					}
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_us")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_us")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
			b.Run("throughput", func(b *testing.B) {
				window := make(chan struct{}, 64)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for range b.N {
						select {
						case <-got:
						case <-ctx.Done():
							return
						}
					}
				}()
				b.ResetTimer()
				for range b.N {
					window <- struct{}{}
					r, err := pub.Publish(ctx, topic, payload, client.PublishOptions{QoS: 1})
					if err != nil {
						b.Fatal(err)
					}
					go func() { _ = r.Wait(ctx); <-window }()
				}
				<-done
				b.StopTimer()
				if ctx.Err() != nil {
					b.Fatal("not every message was delivered")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		})
	}
}
