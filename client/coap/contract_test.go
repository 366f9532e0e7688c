package coap_test

import (
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/contracttest"
	"github.com/iotq/iotq/transport/coapmsg"
)

// TestContract runs the common API's contract (client/contracttest) on
// every CoAP transport against our broker's CoAP front; coaps once with
// a PSK identity and once with certificates.
func TestContract(t *testing.T) {
	srv := startBrokerTB(t)
	// Streams end with the connection; over UDP and DTLS there is none, so
	// a vanished broker shows as a CON that is never acknowledged (short
	// RFC 7252 parameters end it within 2.8 to 4.2s).
	streams := contracttest.Capabilities{LossBound: 10 * time.Second, LossErr: client.ErrConnectionLost, Connection: true}
	datagrams := contracttest.Capabilities{LossBound: 10 * time.Second, LossErr: coapmsg.ErrTimeout}
	certs := client.Options{CAFile: srv.CAFile(), ServerName: "127.0.0.1"}
	psk := client.Options{Username: "dev1", Password: "secret1"}
	const fastCON = "ack_timeout=400ms&ack_random_factor=1.5&max_retransmit=2"
	// Over QUIC only silence tells that the broker vanished.
	quicIdle := func(o *client.Options) { o.QUIC.MaxIdleTimeout = 2 * time.Second }
	rows := []contracttest.Row{
		{Name: "coap", URL: endpointOf(t, srv, "coap"), Caps: datagrams, BrokerGoneQuery: fastCON},
		{Name: "coaps-psk", URL: endpointOf(t, srv, "coaps"), Options: psk, Caps: datagrams, BrokerGoneQuery: fastCON},
		{Name: "coaps-cert", URL: endpointOf(t, srv, "coaps"), Options: certs, Caps: datagrams, BrokerGoneQuery: fastCON},
		{Name: "coap+tcp", URL: endpointOf(t, srv, "coap+tcp"), Caps: streams},
		{Name: "coaps+tcp", URL: endpointOf(t, srv, "coaps+tcp"), Options: certs, Caps: streams},
		{Name: "coap+quic", URL: endpointOf(t, srv, "coap+quic"), Options: certs, Caps: streams, BrokerGoneOptions: quicIdle},
	}
	for i := range rows {
		rows[i].Protocol = "coap" // no QoS 2, no wildcards: the zero capabilities
	}
	contracttest.Run(t, rows)
}
