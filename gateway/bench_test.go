package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// procStat reads the resident set (KiB) and CPU time of a process.
func procStat(b *testing.B, pid int) (rssKiB int, cpu time.Duration) {
	b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			rssKiB, _ = strconv.Atoi(f[1])
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.Atoi(f[11]) // field 14 of stat, in clock ticks (100 Hz)
	stime, _ := strconv.Atoi(f[12])
	return rssKiB, time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkGatewayProcess runs `iotq gateway` as a process of its own in
// front of Mosquitto and reads its memory and CPU time from /proc: the
// resident memory per idle forwarded MQTT connection (200 connections) and
// the CPU time per message published through it (each message crosses the
// gateway twice: publisher to broker, broker to subscriber; QoS 0, 100
// bytes).
//
// Run: go test -run '^$' -bench GatewayProcess -benchtime 20000x ./gateway
func BenchmarkGatewayProcess(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "iotq")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/iotq/iotq/cmd/iotq").CombinedOutput(); err != nil {
		b.Fatalf("build iotq: %v: %s", err, out)
	}
	up := startMosquitto(b)
	ready := filepath.Join(dir, "ready.json")
	cmd := exec.Command(bin, "gateway", "--route", "quic://127.0.0.1:0="+up, "--state-dir", dir, "--ready-file", ready, "--log-level", "warn")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	var rf struct {
		Listeners []string `json:"listeners"`
		CAFile    string   `json:"ca_file"`
	}
	iotqtest.Eventually(b, 20*time.Second, func() error {
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(data, &rf)
	})
	url, o := rf.Listeners[0], client.Options{CAFile: rf.CAFile, KeepAlive: 10 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pid := cmd.Process.Pid

	const idle = 200
	rss0, _ := procStat(b, pid)
	var conns []client.Client
	for range idle {
		c, err := client.Dial(ctx, url, o)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	rss1, _ := procStat(b, pid)
	for _, c := range conns {
		c.Close()
	}

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
	got := make(chan struct{}, 4096)
	if err := sub.Subscribe(ctx, "bench/proc", client.SubscribeOptions{QoS: 0}, func(client.Message) { got <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	_, cpu0 := procStat(b, pid)
	b.ResetTimer()
	received := 0
	for i := range b.N {
		if _, err := pub.Publish(ctx, "bench/proc", payload, client.PublishOptions{QoS: 0}); err != nil {
			b.Fatal(err)
		}
		if i-received >= 512 { // keep Mosquitto's queue from dropping QoS 0
			<-got
			received++
		}
	}
	deadline := time.After(30 * time.Second)
	for received < b.N {
		select {
		case <-got:
			received++
		case <-deadline:
			b.Logf("received %d of %d", received, b.N)
			received = b.N
		}
	}
	b.StopTimer()
	_, cpu1 := procStat(b, pid)
	b.ReportMetric(float64(rss1-rss0)/idle, "KiB/idle_conn")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu_us/msg")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
