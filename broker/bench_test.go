package broker_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
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
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// Benchmarks (not timed tests). Run, bounded:
//
//	go test ./broker -run '^$' -bench . -benchtime 200000x -timeout 20m
//
// b.N is the number of published messages. Reported metrics: msg/s
// delivered, lost_% and p50/p99 one-way latency in microseconds.

// startMosquitto starts a Mosquitto broker on a free loopback port (see
// testutil.StartMosquitto).
func startMosquitto(tb testing.TB) (addr string, pid int) {
	tb.Helper()
	m := testutil.StartMosquitto(tb, "max_queued_messages 100000\nmax_inflight_messages 100")
	return m.Addr(), m.PID
}

type benchTarget struct {
	name string
	dial func() (net.Conn, error)
}

func benchTargets(b *testing.B) []benchTarget {
	var out []benchTarget
	for _, variant := range []struct {
		name string
		opts broker.Options
	}{
		{"iotq", broker.Options{Store: broker.StoreNone}},
		{"iotq-store", broker.Options{}},
		{"iotq-nobackpressure", broker.Options{Store: broker.StoreNone, Flow: broker.FlowOptions{NoBackpressure: true}}},
		// Idle clients keep their goroutine (mochi fork patch 18 off).
		{"iotq-nopark", broker.Options{Store: broker.StoreNone, Flow: broker.FlowOptions{ParkIdleAfter: -1}}},
	} {
		opts := variant.opts
		var schemes []string
		for _, s := range allSchemes {
			schemes = append(schemes, s)
			opts.Listen = append(opts.Listen, s+"://127.0.0.1:0")
		}
		if variant.name != "iotq" {
			opts.Listen, schemes = opts.Listen[:1], schemes[:1] // comparison on TCP only
		}
		opts.StateDir = b.TempDir()
		srv := brokertest.Start(b, opts)
		for i, s := range schemes {
			u := srv.Endpoints()[i]
			tlsConf := clientTLSB(b, srv)
			out = append(out, benchTarget{name: "broker=" + variant.name + "/transport=" + s, dial: func() (net.Conn, error) {
				ctx, cancel := contextTimeout(10 * time.Second)
				defer cancel()
				return transport.Dial(ctx, u, transport.DialOptions{TLSConfig: tlsConf})
			}})
		}
	}
	if _, err := exec.LookPath("mosquitto"); err == nil || fileExists("/usr/sbin/mosquitto") {
		addr, _ := startMosquitto(b)
		out = append(out, benchTarget{name: "broker=mosquitto/transport=mqtt", dial: func() (net.Conn, error) { return net.Dial("tcp", addr) }})
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func BenchmarkPubSub(b *testing.B) {
	targets := benchTargets(b)
	for _, tg := range targets {
		for _, pat := range []struct {
			name   string
			fanout bool
			n      int
		}{{"p2p-10pairs", false, 10}, {"fanout-1to100", true, 100}} {
			for _, qos := range []byte{0, 1} {
				b.Run(fmt.Sprintf("%s/pattern=%s/qos=%d", tg.name, pat.name, qos), func(b *testing.B) {
					msgs := b.N
					if pat.fanout {
						msgs = max(1, b.N/pat.n) // b.N deliveries in total
					}
					res := runLoad(b, loadSpec{dial: tg.dial, fanout: pat.fanout, pairs: pat.n, qos: qos, messages: max(msgs, pat.n), size: 100, idle: 3 * time.Second})
					b.ReportMetric(res.rate(), "msg/s")
					b.ReportMetric(100*float64(res.lost())/float64(max(1, res.expected)), "lost_%")
					b.ReportMetric(float64(res.p50.Microseconds()), "p50_us")
					b.ReportMetric(float64(res.p99.Microseconds()), "p99_us")
				})
			}
		}
	}
}

// BenchmarkOneInFlight measures latency with one message in flight: publish,
// wait until the subscriber has it, repeat (b.N round trips, QoS 0).
func BenchmarkOneInFlight(b *testing.B) {
	for _, tg := range benchTargets(b) {
		b.Run(tg.name, func(b *testing.B) {
			p50, p99 := pingPong(b, tg.dial, b.N)
			b.ReportMetric(float64(p50.Microseconds()), "p50_us")
			b.ReportMetric(float64(p99.Microseconds()), "p99_us")
		})
	}
}

// pingPong publishes n messages one at a time, each after the previous one
// arrived, and returns the p50 and p99 one-way delay.
func pingPong(tb testing.TB, dial func() (net.Conn, error), n int) (p50, p99 time.Duration) {
	tb.Helper()
	connect := func(id string) *rawClient {
		c, err := dial()
		if err != nil {
			tb.Fatal(err)
		}
		rc, err := rawConnect(c, id)
		if err != nil {
			tb.Fatal(err)
		}
		return rc
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	sub := connect("pp-sub-" + id)
	defer sub.disconnect()
	if err := sub.subscribe("pp/"+id, 0); err != nil {
		tb.Fatal(err)
	}
	pub := connect("pp-pub-" + id)
	defer pub.disconnect()
	payload := make([]byte, 100)
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		pub.publish("pp/"+id, 0, 0, payload)
		if err := pub.flush(); err != nil {
			tb.Fatal(err)
		}
		_ = sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			typ, _, _, err := sub.read()
			if err != nil {
				tb.Fatalf("round %d: %v", i, err)
			}
			if typ == 3 {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
}

// BenchmarkIdleConnectionMemory opens 1000 (IOTQ_IDLE_CONNS) idle MQTT
// connections to a broker process (one per transport) and reports its RSS
// growth per connection (b.N is ignored: one measurement per run). The
// clients live in the test process: mind its open-file limit. RSS is read
// IOTQ_IDLE_SETTLE (default 2s) after the last CONNACK; over 2 minutes
// includes the runtime's periodic GC and its scavenger's returns. With
// IOTQ_IDLE_PROFILE=DIR each broker runs with --pprof and, once its
// clients are idle, its heap profile (after a GC), goroutine stacks and
// metrics (go_memstats_*) go to DIR/heap-SCHEME.pb.gz,
// DIR/goroutine-SCHEME.txt and DIR/metrics-SCHEME.txt (read the heap with
// go tool pprof -top -sample_index=inuse_space).
// IOTQ_BIN=PATH measures that iotq binary instead of building this tree
// (scripts/bench-throughput.sh compares two builds), and
// IOTQ_IDLE_SCHEMES=quic,mqtt,mosquitto limits the brokers started to
// those transports of iotq ("mosquitto": Mosquitto over TCP).
func BenchmarkIdleConnectionMemory(b *testing.B) {
	profDir := os.Getenv("IOTQ_IDLE_PROFILE")
	settle := 2 * time.Second
	if v := os.Getenv("IOTQ_IDLE_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			b.Fatalf("IOTQ_IDLE_SETTLE=%q: want a duration such as 150s", v)
		}
		settle = d
	}
	conns := 1000
	if v := os.Getenv("IOTQ_IDLE_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("IOTQ_IDLE_CONNS=%q: want a positive number of connections", v)
		}
		conns = n
	}
	schemes, withMosquitto := allSchemes, true
	if v := os.Getenv("IOTQ_IDLE_SCHEMES"); v != "" {
		schemes, withMosquitto = nil, false
		for _, s := range strings.Split(v, ",") {
			switch {
			case s == "mosquitto":
				withMosquitto = true
			case slices.Contains(allSchemes, s):
				schemes = append(schemes, s)
			default:
				b.Fatalf("IOTQ_IDLE_SCHEMES=%q: %q is none of mosquitto, %s", v, s, strings.Join(allSchemes, ", "))
			}
		}
	}
	bin := os.Getenv("IOTQ_BIN")
	if bin == "" && len(schemes) > 0 {
		bin = filepath.Join(b.TempDir(), "iotq")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/iotq/iotq/cmd/iotq").CombinedOutput(); err != nil {
			b.Fatalf("build iotq: %v\n%s", err, out)
		}
	}
	type target struct {
		name    string
		scheme  string
		dial    func() (net.Conn, error)
		pid     int
		metrics string // HOST:PORT of the metrics server with --pprof; "" without
	}
	var targets []target
	// One broker process per transport, so each RSS delta is one transport's.
	for _, scheme := range schemes {
		port := testutil.FreePort(b)
		state := b.TempDir()
		rf := filepath.Join(state, "ready.json")
		args := []string{"broker", "--listen", fmt.Sprintf("%s://127.0.0.1:%d", scheme, port), "--log-level", "warn",
			"--state-dir", state, "--store", "none", "--ready-file", rf}
		var metrics string
		if profDir != "" {
			metrics = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(b))
			args = append(args, "--metrics", metrics, "--pprof")
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		testutil.Eventually(b, 20*time.Second, func() error { _, err := os.Stat(rf); return err })
		u := fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
		if scheme == "ws" || scheme == "wss" {
			u += "/mqtt"
		}
		var tlsConf *tls.Config
		if scheme != "mqtt" && scheme != "ws" {
			ca, err := os.ReadFile(filepath.Join(state, "tls", "ca.pem"))
			if err != nil {
				b.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(ca)
			tlsConf = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		}
		targets = append(targets, target{"iotq/transport=" + scheme, scheme, func() (net.Conn, error) {
			ctx, cancel := contextTimeout(10 * time.Second)
			defer cancel()
			// The broker closes a QUIC connection silent for
			// quic.idle_timeout (2m): these clients send QUIC keep-alives,
			// as an idle device would, so that IOTQ_IDLE_SETTLE may be longer.
			return transport.Dial(ctx, u, transport.DialOptions{TLSConfig: tlsConf, QUIC: transport.QUICOptions{KeepAlivePeriod: 30 * time.Second}})
		}, cmd.Process.Pid, metrics})
	}
	if withMosquitto && fileExists("/usr/sbin/mosquitto") {
		a, pid := startMosquitto(b)
		targets = append(targets, target{"mosquitto/transport=mqtt", "mqtt", func() (net.Conn, error) { return net.Dial("tcp", a) }, pid, ""})
	}
	for _, tg := range targets {
		b.Run("broker="+tg.name, func(b *testing.B) {
			before := rssKB(b, tg.pid)
			var cs []net.Conn
			defer func() {
				for _, c := range cs {
					c.Close()
				}
			}()
			for i := range conns {
				c, err := tg.dial()
				if err != nil {
					b.Fatal(err)
				}
				cs = append(cs, c)
				if err := idleConnect(c, fmt.Sprintf("idle-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(settle)
			after := rssKB(b, tg.pid)
			b.ReportMetric(float64(after-before)/float64(conns), "KB/conn")
			if tg.metrics != "" {
				saveProfile(b, "http://"+tg.metrics+"/debug/pprof/heap?gc=1", filepath.Join(profDir, "heap-"+tg.scheme+".pb.gz"))
				saveProfile(b, "http://"+tg.metrics+"/debug/pprof/goroutine?debug=1", filepath.Join(profDir, "goroutine-"+tg.scheme+".txt"))
				saveProfile(b, "http://"+tg.metrics+"/metrics", filepath.Join(profDir, "metrics-"+tg.scheme+".txt")) // go_memstats_*: heap, stacks
			}
		})
	}
}

// saveProfile writes what url answers to path.
func saveProfile(tb testing.TB, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("profile: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("profile %s: %s %v", url, resp.Status, err)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		tb.Fatalf("profile: %v", err)
	}
}

// idleConnect sends a minimal CONNECT and reads CONNACK, without buffers.
func idleConnect(c net.Conn, id string) error {
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 4, 0x02, 0, 0)
	body = appendStr(body, id)
	if _, err := c.Write(append(appendVarint([]byte{0x10}, len(body)), body...)); err != nil {
		return err
	}
	ack := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(ack)
	return err
}

func rssKB(tb testing.TB, pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}
