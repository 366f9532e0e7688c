package mqtt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/contracttest"
)

// TestContract runs the common API's contract (client/contracttest) on
// MQTT 3.1.1 and 5 over every MQTT transport, against our broker.
func TestContract(t *testing.T) {
	schemes := []string{"mqtt", "mqtts", "ws", "wss", "quic"}
	var listen []string
	for _, s := range schemes {
		listen = append(listen, s+"://127.0.0.1:0")
	}
	srv := brokertest.Start(t, broker.Options{Listen: listen, StateDir: t.TempDir(), Store: broker.StoreNone})
	caps := contracttest.Capabilities{QoS2: true, Wildcards: true, LossBound: 10 * time.Second, LossErr: client.ErrConnectionLost, Connection: true}
	var rows []contracttest.Row
	for _, v := range []struct {
		version int
		proto   string
	}{{client.ProtocolMQTT311, "mqtt/3.1.1"}, {client.ProtocolMQTT5, "mqtt/5"}} {
		for _, s := range schemes {
			rows = append(rows, contracttest.Row{
				Name:     fmt.Sprintf("%s/%s", v.proto, s),
				URL:      brokertest.Endpoint(t, srv, s),
				Options:  client.Options{ProtocolVersion: v.version, CAFile: srv.CAFile()},
				Protocol: v.proto,
				Caps:     caps,
				// Over QUIC only silence tells that the broker vanished.
				BrokerGoneOptions: func(o *client.Options) { o.QUIC.MaxIdleTimeout = 2 * time.Second },
			})
		}
	}
	contracttest.Run(t, rows)
}
