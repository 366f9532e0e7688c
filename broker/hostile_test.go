package broker_test

// Hostile and heavy load (issue 11 item 6): many connections opened
// quickly, a consumer that never reads, malformed input on every MQTT
// listener and a misbehaving QUIC peer, each while a healthy client
// publishes and receives. Bounds are generous correctness bounds, never
// speed assertions; the figures are logged (go test -v -run Hostile).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport/endpoint"
)

// healthProbe is a healthy paho client pair: a publisher and a subscriber
// on one topic; once checks that a QoS 1 message goes through.
type healthProbe struct {
	pub   pahov3.Client
	topic string
	got   chan string
	seq   atomic.Int64
}

func newHealthProbe(t *testing.T, srv *broker.Server, u, name string) *healthProbe {
	t.Helper()
	h := &healthProbe{topic: "health/" + name, got: make(chan string, 1024)}
	sub := v3Client(t, srv, u, name+"-sub", nil)
	wait(t, sub.Subscribe(h.topic, 1, func(_ pahov3.Client, m pahov3.Message) {
		select {
		case h.got <- string(m.Payload()):
		default:
		}
	}), "health subscribe")
	h.pub = v3Client(t, srv, u, name+"-pub", nil)
	return h
}

// once publishes one QoS 1 message and waits until the subscriber has it.
func (h *healthProbe) once(timeout time.Duration) error {
	p := strconv.FormatInt(h.seq.Add(1), 10)
	tok := h.pub.Publish(h.topic, 1, false, p)
	if !tok.WaitTimeout(timeout) {
		return fmt.Errorf("health message %s: no PUBACK within %v", p, timeout)
	}
	if err := tok.Error(); err != nil {
		return fmt.Errorf("health message %s: %w", p, err)
	}
	deadline := time.After(timeout)
	for {
		select {
		case g := <-h.got:
			if g == p {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("health message %s not delivered within %v", p, timeout)
		}
	}
}

func (h *healthProbe) check(t *testing.T, when string) {
	t.Helper()
	if err := h.once(testutil.Scale(10 * time.Second)); err != nil {
		t.Fatalf("healthy client %s: %v", when, err)
	}
}

// during probes continuously until the returned stop is called; stop
// returns how many probes went through and the first failure.
func (h *healthProbe) during() (stop func() (int, error)) {
	done := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		for {
			select {
			case <-done:
				res <- r
				return
			default:
			}
			if err := h.once(testutil.Scale(10 * time.Second)); err != nil {
				if r.err == nil {
					r.err = err
				}
			} else {
				r.n++
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() (int, error) {
		close(done)
		r := <-res
		return r.n, r.err
	}
}

// hostileConnect is a CONNECT (MQTT 3.1.1, clean session) with keep-alive
// seconds.
func hostileConnect(id string, keepAlive uint16) []byte {
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 4, 0x02)
	body = binary.BigEndian.AppendUint16(body, keepAlive)
	body = appendStr(body, id)
	return append(appendVarint([]byte{0x10}, len(body)), body...)
}

func subscribePacket(id uint16, filters ...string) []byte {
	body := binary.BigEndian.AppendUint16(nil, id)
	for _, f := range filters {
		body = appendStr(body, f)
		body = append(body, 0)
	}
	return append(appendVarint([]byte{0x82}, len(body)), body...)
}

func publishPacket(topic string, payload []byte) []byte {
	body := append(appendStr(nil, topic), payload...)
	return append(appendVarint([]byte{0x30}, len(body)), body...)
}

// expectClosed reads c until the broker closes it; a timeout fails.
func expectClosed(t *testing.T, c net.Conn, timeout time.Duration, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(timeout)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("broker kept the connection open after %s", what)
	}
}

// TestHostileManyConnections opens IOTQ_HOSTILE_CONNS (default 2000) MQTT
// connections as fast as 16 dialers can, measures the CONNACK latency of
// newcomers while they are open, closes them and checks that the broker's
// goroutines, connection gauge and heap come back. The broker runs in this
// process, so the heap is measured with runtime.ReadMemStats after a GC.
func TestHostileManyConnections(t *testing.T) {
	n := 2000
	if s := os.Getenv("IOTQ_HOSTILE_CONNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("IOTQ_HOSTILE_CONNS=%q: want a positive number of connections", s)
		}
		n = v
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && uint64(2*n+512) > lim.Cur {
		// Both ends of every connection live in this process.
		m := int(lim.Cur-512) / 2
		t.Logf("open-file limit %d allows %d connections, not %d (raise it with ulimit -n)", lim.Cur, m, n)
		n = m
	}
	srv := brokertest.Start(t, broker.Options{Metrics: "127.0.0.1:0"})
	addr := strings.TrimPrefix(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://")
	u := brokertest.Endpoint(t, srv, "mqtt")
	probe := newHealthProbe(t, srv, u, "many")
	probe.check(t, "before")

	heap := func() uint64 {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	heapBefore, gBefore := heap(), runtime.NumGoroutine()

	conns := make([]net.Conn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := net.Dial("tcp", addr)
				if err == nil {
					conns[i] = c
					err = idleConnect(c, fmt.Sprintf("crowd-%d", i))
				}
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	opened := time.Since(start)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	select {
	case err := <-errs:
		t.Fatalf("opening %d connections: %v", n, err)
	default:
	}
	t.Logf("%d connections opened in %v (%.0f/s)", n, opened.Round(time.Millisecond), float64(n)/opened.Seconds())

	// Newcomers while the crowd is open.
	const newcomers = 50
	lat := make([]time.Duration, 0, newcomers)
	for i := range newcomers {
		t0 := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("newcomer %d: %v", i, err)
		}
		err = idleConnect(c, fmt.Sprintf("newcomer-%d", i))
		lat = append(lat, time.Since(t0))
		c.Close()
		if err != nil {
			t.Fatalf("newcomer %d: no CONNACK with %d connections open: %v", i, n, err)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	probe.check(t, fmt.Sprintf("with %d connections open", n))
	heapOpen := heap()
	t.Logf("newcomer CONNACK latency with %d open: p50 %v p99 %v max %v", n, p50, p99, lat[len(lat)-1])
	if p50 > testutil.Scale(time.Second) {
		t.Errorf("newcomer CONNACK p50 %v with %d connections open, want under 1 s", p50, n)
	}
	if v := metricValue(scrape(t, srv), `iotq_broker_connections_open{transport="mqtt"}`); v < float64(n) {
		t.Errorf("connections_open = %v with %d open", v, n)
	}

	for i, c := range conns {
		c.Close()
		conns[i] = nil
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if v := metricValue(scrape(t, srv), `iotq_broker_connections_open{transport="mqtt"}`); v > 2 {
			return notYet("connections_open = %v after closing, want 2 (the health probe)", v)
		}
		if g := runtime.NumGoroutine(); g > gBefore+20 {
			return notYet("%d goroutines after closing, %d before", g, gBefore)
		}
		return nil
	})
	var heapAfter uint64
	testutil.Eventually(t, 20*time.Second, func() error {
		heapAfter = heap()
		// Returned: at most a quarter of what the crowd took stays, plus
		// 4 MiB of slack for caches and the GC's pace.
		if grown := int64(heapOpen) - int64(heapBefore); int64(heapAfter) > int64(heapBefore)+grown/4+4<<20 {
			return notYet("heap %d KiB after closing, %d KiB before, %d KiB while open", heapAfter>>10, heapBefore>>10, heapOpen>>10)
		}
		return nil
	})
	t.Logf("heap: before %d KiB, %d open %d KiB, after closing %d KiB; goroutines before %d, after %d",
		heapBefore>>10, n, heapOpen>>10, heapAfter>>10, gBefore, runtime.NumGoroutine())
	probe.check(t, "after the crowd left")
}

// TestHostileSlowConsumerDoesNotStarveOthers: a subscriber that never
// reads shares a topic with a healthy one. The healthy subscriber receives
// every message; QoS 0 messages for the stuck one are dropped and counted;
// QoS 1 messages for it are kept in its session and delivered when it comes
// back (docs/broker.md, flow control).
func TestHostileSlowConsumerDoesNotStarveOthers(t *testing.T) {
	for _, qos := range []byte{0, 1} {
		t.Run(fmt.Sprintf("QoS %d", qos), func(t *testing.T) {
			// QoS 1: a short write_timeout cuts the stuck subscriber off
			// soon (its session keeps the messages). QoS 0: the default,
			// so that the stall (no progress for max_stall), not a
			// write_timeout disconnection racing it on a loaded machine,
			// decides, and the drops are counted per message.
			writeTimeout := 300 * time.Millisecond
			if qos == 0 {
				writeTimeout = broker.DefaultWriteTimeout
			}
			// No queued-bytes limit: 10 MB of QoS 1 is more than the
			// default keeps for the stuck session (that limit has tests of
			// its own, queuedbytes_test.go).
			srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{
				MaxStall: 200 * time.Millisecond, WriteTimeout: writeTimeout,
			}, Limits: broker.LimitsOptions{MaxQueuedBytes: -1}, Metrics: "127.0.0.1:0"})
			u := brokertest.Endpoint(t, srv, "mqtt")
			c, err := net.Dial("tcp", strings.TrimPrefix(u, "mqtt://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.(*net.TCPConn).SetReadBuffer(4096)
			stuck, err := rawConnectSession(c, "stuck", qos == 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := stuck.subscribe("shared", qos); err != nil {
				t.Fatal(err)
			}
			// 10 MB: more than the stuck client's queue and socket buffers hold.
			const n = 10000
			got := make(chan string, 2*n)
			healthy := v3Client(t, srv, u, "healthy", nil)
			wait(t, healthy.Subscribe("shared", qos, func(_ pahov3.Client, m pahov3.Message) { got <- string(m.Payload()[:5]) }), "subscribe")
			pub := v3Client(t, srv, u, "pub", func(o *pahov3.ClientOptions) { o.SetWriteTimeout(0) })
			payload := strings.Repeat("x", 1000)
			start := time.Now()
			toks := make([]pahov3.Token, 0, n)
			for i := range n {
				toks = append(toks, pub.Publish("shared", qos, false, fmt.Sprintf("%05d%s", i, payload)))
			}
			for i, tok := range toks {
				if !tok.WaitTimeout(testutil.Scale(60*time.Second)) || tok.Error() != nil {
					t.Fatalf("publish %d: %v", i, tok.Error())
				}
			}
			seen := map[string]bool{}
			deadline := time.After(testutil.Scale(60 * time.Second))
			for len(seen) < n {
				select {
				case id := <-got:
					seen[id] = true
				case <-deadline:
					t.Fatalf("healthy subscriber got %d of %d messages while another never read", len(seen), n)
				}
			}
			t.Logf("healthy subscriber: %d messages in %v beside a stuck one", n, time.Since(start).Round(time.Millisecond))
			m := scrape(t, srv)
			if qos == 0 {
				if v := metricValue(m, `iotq_broker_messages_dropped_total{qos="0",reason="queue_full"}`); v <= 0 {
					t.Fatalf("no QoS 0 drop counted for the stuck subscriber (messages_dropped_total = %v)\n%s", v, droppedLines(m))
				}
				return
			}
			testutil.Eventually(t, 20*time.Second, func() error {
				if srv.Subscriptions("stuck") > 0 {
					return notYet("stuck subscriber still connected")
				}
				return nil
			})
			_ = c.Close()
			back := make(chan string, 2*n)
			v3Client(t, srv, u, "stuck", func(o *pahov3.ClientOptions) {
				o.SetCleanSession(false).SetDefaultPublishHandler(func(_ pahov3.Client, m pahov3.Message) { back <- string(m.Payload()[:5]) })
			})
			kept := map[string]bool{}
			deadline = time.After(testutil.Scale(60 * time.Second))
			for len(kept) < n {
				select {
				case id := <-back:
					kept[id] = true
				case <-deadline:
					t.Fatalf("stuck subscriber got %d of %d QoS 1 messages after coming back", len(kept), n)
				}
			}
		})
	}
}

// TestHostileMalformedInputEveryListener sends malformed MQTT on every
// listener while a healthy paho client on that listener publishes and
// receives before, during and after.
func TestHostileMalformedInputEveryListener(t *testing.T) {
	srv, schemes := startMatrixBroker(t, broker.Options{Metrics: "127.0.0.1:0"})
	rng := rand.New(rand.NewPCG(11, 6))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			u := brokertest.Endpoint(t, srv, scheme)
			probe := newHealthProbe(t, srv, u, "h-"+scheme)
			watchBox := newInbox()
			watcher := v3Client(t, srv, u, "watch-"+scheme, nil)
			wait(t, watcher.Subscribe("bad/#", 0, watchBox.v3Handler()), "watcher subscribe")
			probe.check(t, "before")
			stop := probe.during()

			// connected dials u and, unless id is "", connects as id.
			connected := func(t *testing.T, id string) net.Conn {
				t.Helper()
				c := dial(t, srv, u)
				t.Cleanup(func() { c.Close() })
				if id != "" {
					if _, err := rawConnect(c, id); err != nil {
						t.Fatal(err)
					}
				}
				return c
			}
			send := func(t *testing.T, c net.Conn, b []byte) {
				t.Helper()
				// The broker may close while we write: that is an answer too.
				_ = c.SetWriteDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
				_, _ = c.Write(b)
			}

			t.Run("random bytes instead of CONNECT", func(t *testing.T) {
				for i := range 5 {
					c := connected(t, "")
					b := random(1000)
					b[0] = byte(0x20 + rng.IntN(0xd0)) // any packet type but CONNECT
					send(t, c, b)
					expectClosed(t, c, 10*time.Second, fmt.Sprintf("random bytes #%d", i))
				}
			})
			t.Run("random bytes after CONNECT", func(t *testing.T) {
				c := dial(t, srv, u)
				defer c.Close()
				// Keep-alive 1 s: whatever the random bytes parse as, an
				// incomplete packet times out after 1.5 s.
				send(t, c, hostileConnect("rnd-"+scheme, 1))
				send(t, c, random(4000))
				expectClosed(t, c, 15*time.Second, "random bytes after CONNECT")
			})
			t.Run("raw socket garbage under the transport", func(t *testing.T) {
				addr := srv.Addrs()[slices.Index(srv.Endpoints(), u)].String()
				if scheme == "quic" {
					uc, err := net.Dial("udp", addr)
					if err != nil {
						t.Fatal(err)
					}
					defer uc.Close()
					for range 200 {
						_, _ = uc.Write(random(1200))
					}
					return
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				send(t, c, random(5000))
				expectClosed(t, c, 15*time.Second, "raw garbage")
			})
			t.Run("huge remaining length in CONNECT", func(t *testing.T) {
				c := connected(t, "")
				send(t, c, []byte{0x10, 0xff, 0xff, 0xff, 0x7f, 0, 4, 'M', 'Q', 'T', 'T'})
				expectClosed(t, c, 10*time.Second, "a CONNECT of 256 MiB announced")
			})
			t.Run("huge remaining length in PUBLISH", func(t *testing.T) {
				c := connected(t, "huge-"+scheme)
				send(t, c, []byte{0x30, 0xff, 0xff, 0xff, 0x7f, 0, 3, 'b', 'a', 'd'})
				expectClosed(t, c, 10*time.Second, "a PUBLISH of 256 MiB announced")
			})
			t.Run("SUBSCRIBE with 5000 topic filters", func(t *testing.T) {
				c := connected(t, "many-"+scheme)
				rc := &rawClient{c: c, r: bufio.NewReaderSize(c, 64<<10)}
				filters := make([]string, 5000)
				for i := range filters {
					filters[i] = fmt.Sprintf("many/%d/+", i)
				}
				send(t, c, subscribePacket(7, filters...))
				_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(20 * time.Second)))
				typ, _, body, err := rc.read()
				if err == nil && typ != 9 {
					t.Fatalf("answer to SUBSCRIBE: packet type %d", typ)
				}
				if err == nil {
					if len(body) != 2+len(filters) {
						t.Fatalf("SUBACK with %d return codes for %d filters", len(body)-2, len(filters))
					}
					granted := 0
					for _, rc := range body[2:] {
						if rc <= 2 {
							granted++
						}
					}
					if granted > broker.DefaultMaxSubscriptions {
						t.Fatalf("%d of %d filters granted, limit %d", granted, len(filters), broker.DefaultMaxSubscriptions)
					}
					t.Logf("SUBACK: %d of %d filters granted", granted, len(filters))
				} else {
					t.Logf("broker closed the connection: %v", err)
				}
				c.Close()
				testutil.Eventually(t, 10*time.Second, func() error {
					if n := srv.Subscriptions("many-" + scheme); n > 0 {
						return notYet("%d subscriptions left after a clean session closed", n)
					}
					return nil
				})
			})
			t.Run("PUBLISH with invalid UTF-8 topic", func(t *testing.T) {
				c := connected(t, "utf-"+scheme)
				send(t, c, publishPacket("bad/\xc3\x28", []byte("x")))
				expectClosed(t, c, 10*time.Second, "a PUBLISH with invalid UTF-8")
			})
			t.Run("PUBLISH with U+0000 in the topic", func(t *testing.T) {
				c := connected(t, "nul-"+scheme)
				send(t, c, publishPacket("bad/a\x00b", []byte("x")))
				expectClosed(t, c, 10*time.Second, "a PUBLISH with U+0000 in the topic")
			})
			t.Run("SUBSCRIBE with invalid UTF-8 filter", func(t *testing.T) {
				c := connected(t, "utfs-"+scheme)
				send(t, c, subscribePacket(3, "bad/\xff\xfe/#"))
				expectClosed(t, c, 10*time.Second, "a SUBSCRIBE with invalid UTF-8")
			})

			n, err := stop()
			if err != nil {
				t.Fatalf("healthy client during the malformed input (%d probes went through): %v", n, err)
			}
			t.Logf("healthy client: %d messages through during the malformed input", n)
			probe.check(t, "after")
			if m := watchBox.len(); m != 0 {
				t.Fatalf("a subscriber to bad/# received %d messages with invalid topics", m)
			}
		})
	}
}

// TestHostileQUICPeer: one QUIC connection tries to open 100 streams (the
// broker allows one: the first bidirectional stream carries MQTT), another
// sends garbage on its stream, a third offers a wrong ALPN, and raw
// datagrams arrive; a healthy QUIC client works throughout, and so does the
// first stream of the greedy connection.
func TestHostileQUICPeer(t *testing.T) {
	srv, u := quicBroker(t, broker.Options{})
	probe := newHealthProbe(t, srv, u, "qhealth")
	probe.check(t, "before")
	stop := probe.during()
	addr := srv.Addrs()[0].String()

	ctx, cancel := contextTimeout(30 * time.Second)
	defer cancel()
	cfg := clientTLS(t, srv).Clone()
	cfg.NextProtos = []string{endpoint.ALPNMQTT}
	conn, err := quic.DialAddr(ctx, addr, cfg, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	first, err := conn.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	fc := &streamConn{Stream: first, conn: conn}
	rc, err := rawConnect(fc, "greedy")
	if err != nil {
		t.Fatal(err)
	}
	opened, refused := 1, 0
	var extra []*quic.Stream
	for range 99 {
		s, err := conn.OpenStream()
		if errors.Is(err, &quic.StreamLimitReachedError{}) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("open stream: %v", err)
		}
		opened++
		extra = append(extra, s)
	}
	t.Logf("100 streams tried on one connection: %d opened, %d refused by the stream limit", opened, refused)
	// Any extra stream that opened must not get an MQTT session.
	for i, s := range extra {
		_, _ = s.Write(hostileConnect(fmt.Sprintf("extra-%d", i), 30))
		_ = s.SetReadDeadline(time.Now().Add(testutil.Scale(2 * time.Second)))
		b, _ := io.ReadAll(s)
		if len(b) > 0 && b[0] == 0x20 {
			t.Fatalf("extra stream %d got a CONNACK: the broker serves more than the first stream", i)
		}
	}
	// The first stream still works.
	if err := rc.subscribe("greedy/t", 0); err != nil {
		t.Fatal(err)
	}
	rc.publish("greedy/t", 0, 0, []byte("mine"))
	if err := rc.flush(); err != nil {
		t.Fatal(err)
	}
	_ = fc.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	for {
		typ, flags, body, err := rc.read()
		if err != nil {
			t.Fatalf("first stream after 100 stream attempts: %v", err)
		}
		if typ == 3 {
			if _, _, _, p, _ := parsePublish(flags, body); string(p) == "mine" {
				break
			}
		}
	}

	t.Run("garbage on the stream", func(t *testing.T) {
		c := dial(t, srv, u)
		defer c.Close()
		_, _ = c.Write(append(hostileConnect("garbled", 30), bytes.Repeat([]byte{0xff}, 64)...))
		expectClosed(t, c, 10*time.Second, "garbage on the QUIC stream")
	})
	t.Run("wrong ALPN", func(t *testing.T) {
		bad := clientTLS(t, srv).Clone()
		bad.NextProtos = []string{"h3"}
		ctx, cancel := contextTimeout(10 * time.Second)
		defer cancel()
		if c, err := quic.DialAddr(ctx, addr, bad, nil); err == nil {
			_ = c.CloseWithError(0, "")
			t.Fatal("handshake with ALPN h3 succeeded")
		}
	})
	t.Run("a connection that never opens a stream", func(t *testing.T) {
		ctx, cancel := contextTimeout(10 * time.Second)
		defer cancel()
		c, err := quic.DialAddr(ctx, addr, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseWithError(0, "")
	})

	n, err := stop()
	if err != nil {
		t.Fatalf("healthy QUIC client during the hostile peers (%d probes went through): %v", n, err)
	}
	t.Logf("healthy QUIC client: %d messages through during the hostile peers", n)
	probe.check(t, "after")
}

// streamConn makes a QUIC stream a net.Conn for rawClient.
type streamConn struct {
	*quic.Stream
	conn *quic.Conn
}

func (s *streamConn) LocalAddr() net.Addr  { return s.conn.LocalAddr() }
func (s *streamConn) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }
