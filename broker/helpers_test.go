package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// allSchemes is the transport matrix.
var allSchemes = []string{"mqtt", "mqtts", "ws", "wss", "quic"}

// startMatrixBroker starts a broker listening on every transport of the
// matrix, with a generated certificate in a temp state dir. It returns the
// broker and the schemes (all of allSchemes: no transport is left out
// silently).
func startMatrixBroker(t *testing.T, opts broker.Options) (*broker.Server, []string) {
	t.Helper()
	for _, s := range allSchemes {
		opts.Listen = append(opts.Listen, s+"://127.0.0.1:0")
	}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	return brokertest.Start(t, opts), allSchemes
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), testutil.Scale(d))
}

func clientTLS(t *testing.T, srv *broker.Server) *tls.Config { return clientTLSB(t, srv) }

// clientTLSB trusts the broker's generated CA.
func clientTLSB(t testing.TB, srv *broker.Server) *tls.Config {
	t.Helper()
	if srv.CAFile() == "" {
		return nil
	}
	b, err := os.ReadFile(srv.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("bad CA file")
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

func dial(t *testing.T, srv *broker.Server, rawURL string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	c, err := transport.Dial(ctx, rawURL, transport.DialOptions{TLSConfig: clientTLS(t, srv)})
	if err != nil {
		t.Fatalf("dial %s: %v", rawURL, err)
	}
	return c
}

// v3Client connects an MQTT 3.1.1 client (paho.mqtt.golang) over rawURL.
func v3Client(t *testing.T, srv *broker.Server, rawURL, id string, edit func(*pahov3.ClientOptions)) pahov3.Client {
	t.Helper()
	o := pahov3.NewClientOptions().AddBroker("tcp://placeholder:1").SetClientID(id).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(testutil.Scale(10 * time.Second)).SetOrderMatters(true).
		SetCustomOpenConnectionFn(func(*url.URL, pahov3.ClientOptions) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
			defer cancel()
			return transport.Dial(ctx, rawURL, transport.DialOptions{TLSConfig: clientTLS(t, srv)})
		})
	if edit != nil {
		edit(o)
	}
	c := pahov3.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(testutil.Scale(15*time.Second)) || tok.Error() != nil {
		t.Fatalf("connect %s as %s: %v", rawURL, id, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func wait(t *testing.T, tok pahov3.Token, what string) {
	t.Helper()
	if !tok.WaitTimeout(testutil.Scale(10 * time.Second)) {
		t.Fatalf("%s: timeout", what)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// msg is a received message.
type msg struct {
	topic    string
	payload  string
	qos      byte
	retained bool
}

// inbox collects messages.
type inbox struct {
	mu   sync.Mutex
	msgs []msg
	ch   chan struct{}
}

func newInbox() *inbox { return &inbox{ch: make(chan struct{}, 1)} }

func (b *inbox) add(m msg) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.ch <- struct{}{}:
	default:
	}
}

func (b *inbox) v3Handler() pahov3.MessageHandler {
	return func(_ pahov3.Client, m pahov3.Message) {
		b.add(msg{m.Topic(), string(m.Payload()), m.Qos(), m.Retained()})
	}
}

// waitN waits until n messages arrived and returns them.
func (b *inbox) waitN(t *testing.T, n int, timeout time.Duration) []msg {
	t.Helper()
	deadline := time.After(testutil.Scale(timeout))
	for {
		b.mu.Lock()
		got := append([]msg(nil), b.msgs...)
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-b.ch:
		case <-deadline:
			t.Fatalf("got %d of %d messages: %v", len(got), n, got)
		}
	}
}

func (b *inbox) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.msgs)
}

// v5Client connects an MQTT 5 client (paho.golang) over rawURL.
func v5Client(t *testing.T, srv *broker.Server, rawURL, id string, box *inbox) *paho.Client {
	t.Helper()
	conn := dial(t, srv, rawURL)
	cfg := paho.ClientConfig{ClientID: id, Conn: pahopackets.NewThreadSafeConn(conn)}
	if box != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			box.add(msg{pr.Packet.Topic, string(pr.Packet.Payload), pr.Packet.QoS, pr.Packet.Retain})
			return true, nil
		}}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true})
	if err != nil {
		t.Fatalf("v5 connect %s: %v", rawURL, err)
	}
	if ca.ReasonCode != 0 {
		t.Fatalf("v5 connect %s: reason %d", rawURL, ca.ReasonCode)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

var errNotYet = errors.New("not yet")

func notYet(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotYet, fmt.Sprintf(format, args...))
}
