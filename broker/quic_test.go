package broker_test

import (
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

func quicBroker(t *testing.T, opts broker.Options) (*broker.Server, string) {
	return quicBrokerAt(t, opts, "quic://127.0.0.1:0")
}

func quicBrokerAt(t *testing.T, opts broker.Options, listen string) (*broker.Server, string) {
	t.Helper()
	opts.Listen = []string{listen}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	srv := brokertest.Start(t, opts)
	return srv, brokertest.Endpoint(t, srv, "quic")
}

// TestQUICBadPeers: garbage on the MQTT stream and a wrong ALPN are refused,
// and the broker keeps serving other QUIC clients.
func TestQUICBadPeers(t *testing.T) {
	srv, u := quicBroker(t, broker.Options{})
	box := newInbox()
	sub := v3Client(t, srv, u, "qsub", nil)
	wait(t, sub.Subscribe("q", 0, box.v3Handler()), "subscribe")
	pub := v3Client(t, srv, u, "qpub", nil)

	t.Run("garbage on the stream closes that connection", func(t *testing.T) {
		c := dial(t, srv, u)
		defer c.Close()
		if _, err := c.Write([]byte("\xff\xff\xff\xff\xffnot mqtt at all")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
		if _, err := io.ReadAll(c); err != nil {
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Fatal("broker kept the garbage connection open")
			}
		}
	})
	t.Run("wrong ALPN is refused", func(t *testing.T) {
		cfg := clientTLS(t, srv).Clone()
		cfg.NextProtos = []string{"h3"}
		ctx, cancel := contextTimeout(5 * time.Second)
		defer cancel()
		conn, err := quic.DialAddr(ctx, srv.Addrs()[0].String(), cfg, nil)
		if err == nil {
			_ = conn.CloseWithError(0, "")
			t.Fatal("handshake with ALPN h3 succeeded")
		}
	})
	wait(t, pub.Publish("q", 0, false, "still here"), "publish")
	if got := box.waitN(t, 1, 10*time.Second); got[0].payload != "still here" {
		t.Fatalf("got %+v", got)
	}
}

// TestQUIC0RTT: with a session cache a second connection uses 0-RTT, also
// after a broker restart with the same state directory; --quic-0rtt=false
// refuses it and the client still connects.
func TestQUIC0RTT(t *testing.T) {
	state := t.TempDir()
	connectOnce := func(t *testing.T, srv *broker.Server, u string, cache tls.ClientSessionCache) transport.Info {
		t.Helper()
		ctx, cancel := contextTimeout(10 * time.Second)
		defer cancel()
		c, err := transport.Dial(ctx, u, transport.DialOptions{TLSConfig: clientTLS(t, srv), SessionCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rc, err := rawConnect(c, "zero")
		if err != nil {
			t.Fatal(err)
		}
		rc.disconnect()
		return c.Info()
	}
	cache := tls.NewLRUClientSessionCache(8)
	srv, u := quicBroker(t, broker.Options{StateDir: state, Metrics: "127.0.0.1:0"})
	if info := connectOnce(t, srv, u, cache); info.Used0RTT {
		t.Fatal("first connection used 0-RTT")
	}
	if info := connectOnce(t, srv, u, cache); !info.Used0RTT {
		t.Fatalf("second connection did not use 0-RTT: %+v", info)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if v := metricValue(scrape(t, srv), "iotq_broker_quic_0rtt_total"); v != 1 {
			return notYet("quic_0rtt_total = %v, want 1", v)
		}
		return nil
	})
	_ = srv.Close()

	srv2, u2 := quicBrokerAt(t, broker.Options{StateDir: state}, u) // same port: the client's ticket is for this server
	if info := connectOnce(t, srv2, u2, cache); !info.Used0RTT {
		t.Fatalf("0-RTT did not survive a restart with the same state dir: %+v", info)
	}
	_ = srv2.Close()

	no := false
	srv3, u3 := quicBroker(t, broker.Options{StateDir: state, QUIC: broker.QUICOptions{Allow0RTT: &no}})
	connectOnce(t, srv3, u3, cache)
	if info := connectOnce(t, srv3, u3, cache); info.Used0RTT {
		t.Fatalf("0-RTT used although the broker refuses it: %+v", info)
	}
}

func TestQUICMetrics(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"quic://127.0.0.1:0"}, StateDir: t.TempDir(), Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "quic")
	box := newInbox()
	c := v3Client(t, srv, u, "qm", nil)
	wait(t, c.Subscribe("qm", 1, box.v3Handler()), "subscribe")
	wait(t, c.Publish("qm", 1, false, "x"), "publish")
	box.waitN(t, 1, 5*time.Second)
	m := scrape(t, srv)
	if v := metricValue(m, "iotq_broker_quic_connections_with_stats"); v != 1 {
		t.Errorf("quic connections with stats = %v, want 1", v)
	}
	if v := metricValue(m, `iotq_broker_quic_smoothed_rtt_seconds{stat="max"}`); v <= 0 {
		t.Errorf("quic smoothed RTT max = %v, want > 0", v)
	}
	if v := metricValue(m, `iotq_broker_connections_open{transport="quic"}`); v != 1 {
		t.Errorf("open quic connections = %v, want 1", v)
	}
}
