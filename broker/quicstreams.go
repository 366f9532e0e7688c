package broker

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iotq/iotq/transport"
)

// DefaultQUICMaxStreams is the default QUICOptions.MaxStreams.
const DefaultQUICMaxStreams = 100

// quicStreams returns the multi-stream settings of the quic:// listeners
// (docs/mqtt-quic.md) and registers their counters as metrics. Called once,
// from start.
func (s *Server) quicStreams() transport.QUICStreamOptions {
	q := s.opts.QUIC
	n := q.MaxStreams
	switch {
	case n == 0:
		n = DefaultQUICMaxStreams
	case n < 0:
		return transport.QUICStreamOptions{} // one stream per connection
	}
	cnt := &transport.QUICStreamCounters{}
	so := transport.QUICStreamOptions{
		MaxDataStreams:   n,
		Delivery:         q.Delivery,
		Datagrams:        q.Datagrams == nil || *q.Datagrams,
		DatagramDelivery: q.DatagramDelivery,
		// The control stream hands a larger packet to the engine, which
		// refuses it with its own reason code.
		MaxPacketSize: s.opts.Flow.MaxPacketSize + 5,
		Counters:      cnt,
		// CoAP over QUIC shares the listener code: multi-stream is MQTT's.
		ALPNs: []string{transport.ALPNMQTTNext, transport.ALPN},
	}
	ns := "iotq_broker"
	counter := func(name, help string, labels prometheus.Labels, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	s.met.reg.MustRegister(
		counter("quic_data_streams_total", "Client data streams (MQTT over QUIC multi-stream mode) accepted.", nil, &cnt.DataStreams),
		counter("quic_streams_refused_total", "Client streams refused: past quic.max_streams, a wrong stream or flow type, a bad flow id, a user-defined flow, or CONNECT on a data stream.", nil, &cnt.StreamsRefused),
		counter("quic_server_streams_total", "Streams the broker opened to deliver messages (quic.delivery per-topic or per-publish).", nil, &cnt.ServerStreams),
		counter("quic_datagrams_received_total", "QUIC datagrams from clients, by result: delivered (a QoS 0 PUBLISH handed to the session) or dropped (not a whole QoS 0 PUBLISH, or the session ended).", prometheus.Labels{"result": "delivered"}, &cnt.DatagramsIn),
		counter("quic_datagrams_received_total", "QUIC datagrams from clients, by result: delivered (a QoS 0 PUBLISH handed to the session) or dropped (not a whole QoS 0 PUBLISH, or the session ended).", prometheus.Labels{"result": "dropped"}, &cnt.DatagramsDropped),
		counter("quic_datagrams_sent_total", "QoS 0 deliveries by datagram (quic.datagram_delivery), by result: sent, or too_large (sent on a stream instead).", prometheus.Labels{"result": "sent"}, &cnt.DatagramsOut),
		counter("quic_datagrams_sent_total", "QoS 0 deliveries by datagram (quic.datagram_delivery), by result: sent, or too_large (sent on a stream instead).", prometheus.Labels{"result": "too_large"}, &cnt.DatagramsTooBig),
	)
	return so
}

// quicALPNs is the ALPN list of the quic:// listeners: with multi-stream
// mode, MQTT-next first (a client that offers it may send flow headers),
// then mqtt.
func quicALPNs(so transport.QUICStreamOptions) []string {
	if so.MaxDataStreams > 0 {
		return []string{transport.ALPNMQTTNext, transport.ALPN}
	}
	return []string{transport.ALPN}
}
