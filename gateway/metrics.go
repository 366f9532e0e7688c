package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the gateway's Prometheus registry. Safe for concurrent use.
type metrics struct {
	reg        *prometheus.Registry
	conns      *prometheus.CounterVec // route
	open       *prometheus.GaugeVec   // route
	bytes      *prometheus.CounterVec // route, direction
	early      *prometheus.CounterVec // route, result
	upFailures *prometheus.CounterVec // route, upstream
	closed     *prometheus.CounterVec // route, reason
	quicConns  *prometheus.GaugeVec   // route
	handshakes *prometheus.GaugeVec   // route
	refused    *prometheus.CounterVec // route, limit
	timeouts   *prometheus.CounterVec // route, timeout
	retries    *prometheus.CounterVec // route
}

// Label values.
const (
	dirToUpstream   = "to_upstream" // client -> broker
	dirToClient     = "to_client"   // broker -> client
	earlyAccepted   = "accepted"    // 0-RTT data accepted
	earlyRefused    = "refused"     // ticket allowed 0-RTT, route policy refused it
	reasonNormal    = "normal"      // both sides ended their streams
	reasonNoUp      = "no_upstream" // no upstream answered
	reasonUpReset   = "upstream_error"
	reasonClientErr = "client_error"
	reasonShutdown  = "shutdown"
	reasonFirstData = "first_data_timeout"
	reasonIdle      = "idle_timeout"
	reasonHalfClose = "half_close_timeout"
	reasonNoProxy   = "upstream_rejected_proxy" // upstream closed before answering, PROXY header sent
	limitTotal      = "max_connections"
	limitPerSource  = "max_connections_per_source"
	timeoutFirst    = "first_data"
	timeoutIdle     = "data_idle"
	timeoutHalf     = "half_close"
)

func newMetrics() *metrics {
	const ns = "iotq_gateway"
	m := &metrics{reg: prometheus.NewRegistry()}
	m.conns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connections_total", Help: "QUIC connections accepted (first stream opened), by route."}, []string{"route"})
	m.open = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connections_open", Help: "QUIC connections being forwarded, by route."}, []string{"route"})
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "bytes_total", Help: "Bytes forwarded, by route and direction (to_upstream: client to broker; to_client: broker to client)."}, []string{"route", "direction"})
	m.early = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "early_data_total", Help: "QUIC 0-RTT by route and result: accepted (connection used 0-RTT), refused (the ticket allowed 0-RTT, the route's replay policy refused it)."}, []string{"route", "result"})
	m.upFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_failures_total", Help: "Failed connection attempts to an upstream, by route and upstream."}, []string{"route", "upstream"})
	m.closed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connections_closed_total", Help: "Forwarded connections that ended, by route and reason."}, []string{"route", "reason"})
	m.quicConns = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "quic_connections", Help: "QUIC connections held (handshakes included, refused ones not), as counted for max_connections, by route."}, []string{"route"})
	m.handshakes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "handshakes_in_progress", Help: "QUIC handshakes accepted and not yet complete, by route."}, []string{"route"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connections_refused_total", Help: "QUIC connections refused by a cap, by route and limit (max_connections, max_connections_per_source)."}, []string{"route", "limit"})
	m.timeouts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "timeouts_total", Help: "Connections closed by a gateway timeout, by route and timeout (first_data, data_idle, half_close)."}, []string{"route", "timeout"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "retries_total", Help: "New connection attempts answered with a QUIC Retry (address validation), by route."}, []string{"route"})
	m.reg.MustRegister(m.conns, m.open, m.bytes, m.early, m.upFailures, m.closed, m.quicConns, m.handshakes, m.refused, m.timeouts, m.retries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// initRoute exports zeros for a route, so absence never reads as "none".
func (m *metrics) initRoute(route string, upstreams []string) {
	m.conns.WithLabelValues(route)
	m.open.WithLabelValues(route)
	for _, d := range []string{dirToUpstream, dirToClient} {
		m.bytes.WithLabelValues(route, d)
	}
	for _, r := range []string{earlyAccepted, earlyRefused} {
		m.early.WithLabelValues(route, r)
	}
	for _, u := range upstreams {
		m.upFailures.WithLabelValues(route, u)
	}
	for _, r := range []string{reasonNormal, reasonNoUp, reasonUpReset, reasonClientErr, reasonShutdown, reasonFirstData, reasonIdle, reasonHalfClose, reasonNoProxy} {
		m.closed.WithLabelValues(route, r)
	}
	m.quicConns.WithLabelValues(route)
	m.handshakes.WithLabelValues(route)
	for _, l := range []string{limitTotal, limitPerSource} {
		m.refused.WithLabelValues(route, l)
	}
	for _, t := range []string{timeoutFirst, timeoutIdle, timeoutHalf} {
		m.timeouts.WithLabelValues(route, t)
	}
	m.retries.WithLabelValues(route)
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }
