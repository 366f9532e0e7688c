package coap_test

import (
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/contracttest"
)

// TestContract runs the common API's contract (client/contracttest) on
// every CoAP transport against our broker's CoAP front; coaps once with
// a PSK identity and once with certificates.
func TestContract(t *testing.T) {
	srv := startBrokerTB(t)
	caps := contracttest.Capabilities{QoS2: false, Wildcards: false, LossBound: 10 * time.Second}
	certs := client.Options{CAFile: srv.CAFile(), ServerName: "127.0.0.1"}
	psk := client.Options{Username: "dev1", Password: "secret1"}
	// Over UDP and DTLS a vanished broker shows as a CON that is never
	// acknowledged: short RFC 7252 parameters end it within about 2s.
	const fastCON = "ack_timeout=200ms&ack_random_factor=1.5&max_retransmit=2"
	// Over QUIC only silence tells that the broker vanished.
	quicIdle := func(o *client.Options) { o.QUIC.MaxIdleTimeout = 2 * time.Second }
	rows := []contracttest.Row{
		{Name: "coap", URL: endpointOf(t, srv, "coap"), BrokerGoneQuery: fastCON},
		{Name: "coaps-psk", URL: endpointOf(t, srv, "coaps"), Options: psk, BrokerGoneQuery: fastCON},
		{Name: "coaps-cert", URL: endpointOf(t, srv, "coaps"), Options: certs, BrokerGoneQuery: fastCON},
		{Name: "coap+tcp", URL: endpointOf(t, srv, "coap+tcp")},
		{Name: "coaps+tcp", URL: endpointOf(t, srv, "coaps+tcp"), Options: certs},
		{Name: "coap+quic", URL: endpointOf(t, srv, "coap+quic"), Options: certs, BrokerGoneOptions: quicIdle},
	}
	for i := range rows {
		rows[i].Protocol, rows[i].Caps = "coap", caps
	}
	contracttest.Run(t, rows)
}
