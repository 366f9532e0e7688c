package broker_test

import (
	"bufio"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// TestQUIC0RTTReplay records a client's 0-RTT first flight (CONNECT and a
// QoS 1 PUBLISH written together, before the handshake completed) through
// a UDP proxy, lets the connection finish, and replays the recorded
// datagrams from another port. accept delivers the PUBLISH again (the
// documented risk); hold and refuse deliver it once; a 0-RTT client under
// hold still uses 0-RTT and gets its message through.
func TestQUIC0RTTReplay(t *testing.T) {
	for _, tc := range []struct {
		policy    records.EarlyPolicy
		want0RTT  bool
		delivered int
	}{
		{records.EarlyAccept, true, 2},
		{records.EarlyHold, true, 1},
		{records.EarlyRefuse, false, 1},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
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

			proxy := testutil.NewUDPRelay(t, quicAddr.(*net.UDPAddr), 150*time.Millisecond)
			cache := tls.NewLRUClientSessionCache(4)
			tlsConf := clientTLS(t, srv)
			// Connection 0 fetches a session ticket.
			ctx, cancel := contextTimeout(10 * time.Second)
			defer cancel()
			c0, err := transport.Dial(ctx, "quic://"+proxy.Addr(), transport.DialOptions{TLSConfig: tlsConf, SessionCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			rc0, err := rawConnect(c0, "dev")
			if err != nil {
				t.Fatal(err)
			}
			rc0.disconnect()

			// Connection 1: CONNECT and PUBLISH in the first flight.
			c1, err := transport.Dial(ctx, "quic://"+proxy.Addr(), transport.DialOptions{TLSConfig: tlsConf, SessionCache: cache})
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
			flow := proxy.Sent(1)
			if len(flow) == 0 {
				t.Fatal("nothing recorded for connection 1")
			}
			// Past the time quic-go keeps a closed connection's ids (3 PTO):
			// the replay meets a broker that has forgotten the original.
			time.Sleep(4 * time.Second)
			testutil.ReplayUDP(t, quicAddr.(*net.UDPAddr), flow)

			switch tc.policy {
			case records.EarlyAccept:
				box.waitN(t, 2, 10*time.Second)
			case records.EarlyHold:
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
