package coap_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/coapmsg"
)

// metricOrZero reads one metric line from /metrics; 0 if absent.
func metricOrZero(t *testing.T, srv *broker.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestCoAPOverQUIC0RTTReplay: a coap+quic client writes its CSM and a PUT
// in the 0-RTT flight; the test replays the recorded datagrams from
// another port once the connection is over. accept publishes the value
// again (the documented risk), hold answers the replayed CSM but never
// reads the PUT behind it (the handshake does not complete), refuse has
// no 0-RTT: the MQTT subscriber sees the value twice, once and once.
func TestCoAPOverQUIC0RTTReplay(t *testing.T) {
	for _, tc := range []struct {
		policy    records.EarlyPolicy
		want0RTT  bool
		delivered int64
	}{
		{records.EarlyAccept, true, 2},
		{records.EarlyHold, true, 1},
		{records.EarlyRefuse, false, 1},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			t.Parallel()
			srv := startBroker(t, func(o *broker.Options) {
				o.QUIC = broker.QUICOptions{EarlyData: tc.policy, HandshakeTimeout: 2 * time.Second}
			})
			ctx := context.Background()
			var got atomic.Int64
			mq := dial(t, srv, "mqtt", client.Options{})
			if err := mq.Subscribe(ctx, "replay/c", client.SubscribeOptions{QoS: 1}, func(m client.Message) {
				if !m.Retained {
					got.Add(1)
				}
			}); err != nil {
				t.Fatal(err)
			}
			ep, err := transport.ParseURL(endpointOf(t, srv, "coap+quic"))
			if err != nil {
				t.Fatal(err)
			}
			target, err := net.ResolveUDPAddr("udp", ep.Address())
			if err != nil {
				t.Fatal(err)
			}
			proxy := testutil.NewUDPRelay(t, target, 150*time.Millisecond)
			pep, err := transport.ParseURL("coap+quic://" + proxy.Addr())
			if err != nil {
				t.Fatal(err)
			}
			opts := transport.DialOptions{CAFile: srv.CAFile(), ServerName: "127.0.0.1", SessionCache: tls.NewLRUClientSessionCache(4)}
			dctx, cancel := context.WithTimeout(ctx, testutil.Scale(10*time.Second))
			defer cancel()
			csm, err := coapmsg.EncodeStream(&message.Message{Code: codes.CSM})
			if err != nil {
				t.Fatal(err)
			}
			// Connection 0 fetches a ticket: CSM both ways, then Ping/Pong.
			c0, err := transport.DialEndpoint(dctx, pep, opts)
			if err != nil {
				t.Fatal(err)
			}
			ping, _ := coapmsg.EncodeStream(&message.Message{Code: codes.Ping, Token: message.Token("p")})
			if _, err := c0.Write(append(append([]byte(nil), csm...), ping...)); err != nil {
				t.Fatal(err)
			}
			r0 := bufio.NewReader(c0)
			_ = c0.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			for _, want := range []codes.Code{codes.CSM, codes.Pong} {
				if m, err := coapmsg.ReadStreamMessage(r0, 1<<20); err != nil || m.Code != want {
					t.Fatalf("connection 0: want %v, got %v %v", want, m, err)
				}
			}
			_ = c0.Close()

			// Connection 1: CSM and a PUT in the first flight.
			c1, err := transport.DialEndpoint(dctx, pep, opts)
			if err != nil {
				t.Fatal(err)
			}
			put := &message.Message{Code: codes.PUT, Token: message.Token("put1"), Payload: []byte("switch on")}
			put.Options = put.Options.Add(message.Option{ID: message.URIPath, Value: []byte("t")})
			put.Options = put.Options.Add(message.Option{ID: message.URIPath, Value: []byte("replay")})
			put.Options = put.Options.Add(message.Option{ID: message.URIPath, Value: []byte("c")})
			pb, err := coapmsg.EncodeStream(put)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c1.Write(append(append([]byte(nil), csm...), pb...)); err != nil {
				t.Fatal(err)
			}
			r1 := bufio.NewReader(c1)
			_ = c1.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			for i := 0; i < 2; i++ {
				m, err := coapmsg.ReadStreamMessage(r1, 1<<20)
				if err != nil {
					t.Fatalf("connection 1, message %d: %v", i, err)
				}
				if i == 1 && m.Code>>5 != 2 {
					t.Fatalf("PUT answered %v", m.Code)
				}
			}
			if used := c1.Info().Used0RTT; used != tc.want0RTT {
				t.Fatalf("Used0RTT = %v, want %v", used, tc.want0RTT)
			}
			_ = c1.Close()
			testutil.Eventually(t, 10*time.Second, func() error {
				if got.Load() != 1 {
					return errors.New("the PUT has not reached the MQTT subscriber")
				}
				return nil
			})

			// The attacker replays connection 1's datagrams from another port,
			// after the broker forgot the original connection's ids.
			flow := proxy.Sent(1)
			if len(flow) == 0 {
				t.Fatal("nothing recorded for connection 1")
			}
			time.Sleep(4 * time.Second)
			testutil.ReplayUDP(t, target, flow)
			switch tc.policy {
			case records.EarlyAccept:
				testutil.Eventually(t, 10*time.Second, func() error {
					if got.Load() != 2 {
						return errors.New("the replayed PUT was not published again")
					}
					return nil
				})
			case records.EarlyHold:
				// The replayed CSM was read; the PUT behind it waited for a
				// handshake that never completed.
				testutil.Eventually(t, 15*time.Second, func() error {
					if v := metricOrZero(t, srv, "iotq_broker_quic_0rtt_unconfirmed_total"); v != 1 {
						return errors.New("the held connection has not ended yet")
					}
					return nil
				})
			default:
				time.Sleep(testutil.Scale(3 * time.Second)) // past the handshake timeout
			}
			time.Sleep(200 * time.Millisecond)
			if n := got.Load(); n != tc.delivered {
				t.Fatalf("policy %s: the PUT reached the MQTT subscriber %d times, want %d", tc.policy, n, tc.delivered)
			}
		})
	}
}
