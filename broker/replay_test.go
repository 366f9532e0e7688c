package broker_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// recordingProxy relays UDP datagrams between QUIC clients and a broker on
// loopback and records what each client sent, per client address, so a
// test can replay a client's first flight as an on-path attacker would.
type recordingProxy struct {
	ln     *net.UDPConn
	target *net.UDPAddr
	wg     sync.WaitGroup

	mu    sync.Mutex
	flows map[string]*proxyFlow
	order []*proxyFlow
}

type proxyFlow struct {
	up   *net.UDPConn
	sent [][]byte // client to broker, in order
}

func newRecordingProxy(t *testing.T, target net.Addr) *recordingProxy {
	t.Helper()
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln, target: target.(*net.UDPAddr), flows: map[string]*proxyFlow{}}
	p.wg.Add(1)
	go p.loop()
	t.Cleanup(p.close)
	return p
}

func (p *recordingProxy) loop() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.ln.ReadFromUDP(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		f := p.flows[from.String()]
		if f == nil {
			up, err := net.DialUDP("udp", nil, p.target)
			if err != nil {
				p.mu.Unlock()
				continue
			}
			f = &proxyFlow{up: up}
			p.flows[from.String()] = f
			p.order = append(p.order, f)
			p.wg.Add(1)
			go p.back(up, from)
		}
		f.sent = append(f.sent, append([]byte(nil), buf[:n]...))
		p.mu.Unlock()
		_, _ = f.up.Write(buf[:n])
	}
}

// back relays the broker's datagrams to the client.
func (p *recordingProxy) back(up *net.UDPConn, client *net.UDPAddr) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		// Delayed, as on a real path: the client's first flight (CONNECT
		// and PUBLISH written right after Dial) then surely goes out as
		// 0-RTT data, before the server's handshake answer arrives.
		d := append([]byte(nil), buf[:n]...)
		p.wg.Add(1)
		time.AfterFunc(proxyDelay, func() {
			defer p.wg.Done()
			_, _ = p.ln.WriteToUDP(d, client)
		})
	}
}

// proxyDelay delays every datagram from the broker to a client.
const proxyDelay = 150 * time.Millisecond

func (p *recordingProxy) url() string { return "quic://" + p.ln.LocalAddr().String() }

// flow returns a copy of the datagrams the i-th client sent.
func (p *recordingProxy) flow(i int) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.order) {
		return nil
	}
	return append([][]byte(nil), p.order[i].sent...)
}

func (p *recordingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, f := range p.flows {
		_ = f.up.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// replayDatagrams sends recorded datagrams to target from a new port, as
// an attacker replaying a captured first flight would. The socket stays
// open (answers are read and dropped) until the test ends.
func replayDatagrams(t *testing.T, target net.Addr, dgrams [][]byte) {
	t.Helper()
	c, err := net.DialUDP("udp", nil, target.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil && errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = c.Close(); <-done })
	for _, d := range dgrams {
		if _, err := c.Write(d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQUIC0RTTReplay records a client's 0-RTT first flight (CONNECT and a
// QoS 1 PUBLISH written together, before the handshake completed) through
// a UDP proxy, lets the connection finish, and replays the recorded
// datagrams from another port. accept delivers the PUBLISH again (the
// documented risk); hold and refuse deliver it once; a 0-RTT client under
// hold still uses 0-RTT and gets its message through.
func TestQUIC0RTTReplay(t *testing.T) {
	for _, tc := range []struct {
		policy    string
		want0RTT  bool
		delivered int
	}{
		{broker.EarlyAccept, true, 2},
		{broker.EarlyHold, true, 1},
		{broker.EarlyRefuse, false, 1},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			srv := brokertest.Start(t, broker.Options{
				Listen:  []string{"quic://127.0.0.1:0", "mqtt://127.0.0.1:0"},
				Metrics: "127.0.0.1:0",
				QUIC:    broker.QUICOptions{EarlyData: tc.policy, HandshakeTimeout: 2 * time.Second},
			})
			var quicAddr net.Addr
			for _, a := range srv.Addrs() {
				if _, ok := a.(*net.UDPAddr); ok {
					quicAddr = a
				}
			}
			box := newInbox()
			sub := v3Client(t, srv, brokertest.Endpoint(t, srv, "mqtt"), "watcher", nil)
			wait(t, sub.Subscribe("replay/t", 1, box.v3Handler()), "subscribe")

			proxy := newRecordingProxy(t, quicAddr)
			cache := tls.NewLRUClientSessionCache(4)
			tlsConf := clientTLS(t, srv)
			// Connection 0 fetches a session ticket.
			ctx, cancel := contextTimeout(10 * time.Second)
			defer cancel()
			c0, err := transport.Dial(ctx, proxy.url(), transport.DialOptions{TLSConfig: tlsConf, SessionCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			rc0, err := rawConnect(c0, "dev")
			if err != nil {
				t.Fatal(err)
			}
			rc0.disconnect()

			// Connection 1: CONNECT and PUBLISH in the first flight.
			c1, err := transport.Dial(ctx, proxy.url(), transport.DialOptions{TLSConfig: tlsConf, SessionCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			var flight []byte
			body := appendStr(nil, "MQTT")
			body = append(body, 4, 0x02, 0, 120)
			body = appendStr(body, "dev")
			flight = append(appendVarint(append(flight, 0x10), len(body)), body...)
			pub := appendStr(nil, "replay/t")
			pub = append(pub, 0, 7)
			pub = append(pub, "switch on"...)
			flight = append(appendVarint(append(flight, 0x32), len(pub)), pub...)
			if _, err := c1.Write(flight); err != nil {
				t.Fatal(err)
			}
			rc1 := &rawClient{c: c1, r: bufio.NewReader(c1), w: bufio.NewWriter(c1)}
			_ = c1.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			for _, want := range []byte{2, 4} { // CONNACK, PUBACK
				typ, _, b, err := rc1.read()
				if err != nil || typ != want {
					t.Fatalf("read packet %d: got type %d %v, %v", want, typ, b, err)
				}
			}
			if used := c1.Info().Used0RTT; used != tc.want0RTT {
				t.Fatalf("Used0RTT = %v, want %v (%+v)", used, tc.want0RTT, c1.Info())
			}
			rc1.disconnect()
			box.waitN(t, 1, 10*time.Second)

			// The attacker replays connection 1's datagrams from another port.
			flow := proxy.flow(1)
			if len(flow) == 0 {
				t.Fatal("nothing recorded for connection 1")
			}
			// Past the time quic-go keeps a closed connection's ids (3 PTO):
			// the replay meets a broker that has forgotten the original.
			time.Sleep(4 * time.Second)
			replayDatagrams(t, quicAddr, flow)

			switch tc.policy {
			case broker.EarlyAccept:
				box.waitN(t, 2, 10*time.Second)
			case broker.EarlyHold:
				// The replayed CONNECT was read; the PUBLISH behind it waited
				// for a handshake that never completed.
				testutil.Eventually(t, 15*time.Second, func() error {
					if v := metricValue(scrape(t, srv), "iotq_broker_quic_0rtt_unconfirmed_total"); v != 1 {
						return notYet("quic_0rtt_unconfirmed_total = %v, want 1", v)
					}
					return nil
				})
			default:
				time.Sleep(testutil.Scale(3 * time.Second)) // past the handshake timeout
			}
			time.Sleep(200 * time.Millisecond)
			if n := box.len(); n != tc.delivered {
				t.Fatalf("PUBLISH delivered %d times, want %d", n, tc.delivered)
			}
		})
	}
}
