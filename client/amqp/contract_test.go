package amqp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/contracttest"
	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/testutil"
)

// TestContract runs the common API's contract (client/contracttest) on
// AMQP 1.0 over TCP and TLS against ActiveMQ Artemis, and over QUIC
// through iotq gateway in front of it.
func TestContract(t *testing.T) {
	art := testutil.StartArtemis(t, true)
	g, err := gateway.New(gateway.Options{
		Routes: []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{strings.Replace(art.URL(), "amqp://", "tcp://", 1)},
			ALPN: []string{"amqp"}}},
		StateDir: t.TempDir(), Logger: testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway serves until Close: it was bound to a 30 s context, which
	// ended before the amqp+quic row on a loaded machine (every dial then
	// timed out).
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	caps := contracttest.Capabilities{QoS2: false, Wildcards: false, LossBound: 10 * time.Second, LossErr: client.ErrConnectionLost, Connection: true}
	rows := []contracttest.Row{
		{Name: "amqp", URL: art.URL()},
		{Name: "amqps", URL: art.TLSURL(), Options: client.Options{CAFile: art.CAFile}},
		{Name: "amqp+quic", URL: strings.Replace(g.Endpoints()[0], "quic://", "amqp+quic://", 1), Options: client.Options{CAFile: g.CAFile()},
			// Over QUIC only silence tells that the gateway vanished.
			BrokerGoneOptions: func(o *client.Options) { o.QUIC.MaxIdleTimeout = 2 * time.Second }},
	}
	for i := range rows {
		rows[i].Protocol, rows[i].Caps = "amqp/1.0", caps
	}
	contracttest.Run(t, rows)
}
