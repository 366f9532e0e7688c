package broker_test

import (
	"context"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// An MQTT 5 client learns the broker's packet size limit from CONNACK
// (section 3.2.2.3.6), so it can refuse an oversized message before
// sending it; the default limit (16 MiB) and a configured one.
func TestConnackAnnouncesMaximumPacketSize(t *testing.T) {
	for _, limit := range []int{0, 1000} {
		opts := broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir(), Store: broker.StoreNone}
		opts.Flow.MaxPacketSize = limit
		want := uint32(limit)
		if limit == 0 {
			want = broker.DefaultMaxPacketSize
		}
		srv := brokertest.Start(t, opts)
		conn := dial(t, srv, srv.Endpoints()[0])
		c := paho.NewClient(paho.ClientConfig{ClientID: "mps", Conn: pahopackets.NewThreadSafeConn(conn)})
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		ca, err := c.Connect(ctx, &paho.Connect{ClientID: "mps", KeepAlive: 30, CleanStart: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ca.Properties == nil || ca.Properties.MaximumPacketSize == nil || *ca.Properties.MaximumPacketSize != want {
			t.Fatalf("limit %d: CONNACK properties %+v, want Maximum Packet Size %d", limit, ca.Properties, want)
		}
		_ = c.Disconnect(&paho.Disconnect{})
	}
}
