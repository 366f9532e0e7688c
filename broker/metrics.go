package broker

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/transport"
)

// metrics is the broker's Prometheus registry and the engine observer. It is
// safe for concurrent use; the per-message paths touch only pre-resolved
// counters.
type metrics struct {
	reg *prometheus.Registry

	connsOpen    *prometheus.GaugeVec
	connsTotal   *prometheus.CounterVec
	bytesIn      *prometheus.CounterVec
	bytesOut     *prometheus.CounterVec
	sessions     *prometheus.GaugeVec
	msgsIn       [3]prometheus.Counter
	msgsOut      [3]prometheus.Counter
	msgBytesOut  prometheus.Counter
	droppedVec   *prometheus.CounterVec
	stalls       prometheus.Counter
	refusedVec   *prometheus.CounterVec
	quicLost     prometheus.Counter // from closed QUIC connections
	resumed      *prometheus.CounterVec
	early        prometheus.Counter
	earlyDropped prometheus.Counter

	eng atomic.Pointer[engineRef]

	mu        sync.Mutex
	quicConns map[*meteredConn]struct{} // open QUIC connections, for RTT and loss
	droppedN  atomic.Int64              // all drops, for tests
}

type engineRef struct{ e engine.Engine }

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), quicConns: map[*meteredConn]struct{}{}}
	ns := "iotq_broker"
	m.connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connections_open", Help: "Open transport connections by transport."}, []string{"transport"})
	m.connsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connections_total", Help: "Accepted transport connections by transport."}, []string{"transport"})
	m.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "received_bytes_total", Help: "Bytes read from clients by transport (MQTT layer)."}, []string{"transport"})
	m.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sent_bytes_total", Help: "Bytes written to clients by transport (MQTT layer)."}, []string{"transport"})
	m.sessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "sessions_connected", Help: "Connected MQTT sessions by listener."}, []string{"listener"})
	in := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_received_total", Help: "PUBLISH messages accepted from clients by QoS."}, []string{"qos"})
	out := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_sent_total", Help: "PUBLISH messages written to clients by QoS."}, []string{"qos"})
	for q, l := range []string{"0", "1", "2"} {
		m.msgsIn[q] = in.WithLabelValues(l)
		m.msgsOut[q] = out.WithLabelValues(l)
	}
	m.msgBytesOut = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "messages_sent_bytes_total", Help: "Bytes of PUBLISH packets written to clients."})
	m.droppedVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_dropped_total", Help: "Messages the broker did not deliver, by reason and QoS."}, []string{"reason", "qos"})
	for _, r := range engine.DropReasons {
		for _, q := range []string{"0", "1", "2"} {
			m.droppedVec.WithLabelValues(r, q) // export zeros: absence is not "no drops"
		}
	}
	m.stalls = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "stalls_total", Help: "Times a publisher was held back for max_stall by a subscriber whose queue stayed full."})
	m.refusedVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "refused_total", Help: "Requests refused by a limit or a rule, by kind."}, []string{"kind"})
	for _, k := range engine.RefusalKinds {
		m.refusedVec.WithLabelValues(k)
	}
	m.quicLost = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "quic_closed_packets_lost_total", Help: "Packets lost on QUIC connections that have closed."})
	m.resumed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tls_resumed_total", Help: "Closed TLS and QUIC connections that resumed a session from a ticket, by transport."}, []string{"transport"})
	m.early = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "quic_0rtt_total", Help: "Closed QUIC connections whose 0-RTT data the broker accepted."})
	m.earlyDropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "quic_0rtt_unconfirmed_total", Help: "QUIC connections (early_data: hold) that ended before the handshake confirmed them; nothing they sent after CONNECT was processed (a replayed 0-RTT flight ends this way)."})
	m.reg.MustRegister(m.resumed, m.early, m.earlyDropped)
	m.reg.MustRegister(m.connsOpen, m.connsTotal, m.bytesIn, m.bytesOut, m.sessions, in, out, m.msgBytesOut, m.droppedVec, m.stalls, m.refusedVec, m.quicLost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &engineCollector{m: m})
	return m
}

func (m *metrics) setEngine(e engine.Engine) { m.eng.Store(&engineRef{e}) }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func qosIdx(q byte) int { return int(min(q, 2)) }

func (m *metrics) MessageIn(qos byte) { m.msgsIn[qosIdx(qos)].Inc() }
func (m *metrics) MessageOut(qos byte, n int) {
	m.msgsOut[qosIdx(qos)].Inc()
	m.msgBytesOut.Add(float64(n))
}
func (m *metrics) Dropped(reason string, qos byte) {
	m.droppedN.Add(1)
	m.droppedVec.WithLabelValues(reason, string('0'+qos)).Inc()
}
func (m *metrics) Stalled()                      { m.stalls.Inc() }
func (m *metrics) Refused(kind string)           { m.refusedVec.WithLabelValues(kind).Inc() }
func (m *metrics) SessionOpened(listener string) { m.sessions.WithLabelValues(listener).Inc() }
func (m *metrics) SessionClosed(listener string) { m.sessions.WithLabelValues(listener).Dec() }

// quicStatser is implemented by QUIC connections of package transport.
type quicStatser interface {
	QUICStats() (transport.QUICStats, bool)
}

// wrapConn counts bytes and open connections of c.
func (m *metrics) wrapConn(c net.Conn, scheme string) *meteredConn {
	mc := &meteredConn{Conn: c, m: m, scheme: scheme, in: m.bytesIn.WithLabelValues(scheme), out: m.bytesOut.WithLabelValues(scheme), open: m.connsOpen.WithLabelValues(scheme)}
	m.connsTotal.WithLabelValues(scheme).Inc()
	mc.open.Inc()
	if qs, ok := c.(quicStatser); ok {
		if _, ok := qs.QUICStats(); ok {
			mc.quic = qs
			m.mu.Lock()
			m.quicConns[mc] = struct{}{}
			m.mu.Unlock()
		}
	}
	return mc
}

// meteredConn counts the bytes of a connection. Read and Write may be
// called concurrently (one reader, one writer), as for any net.Conn.
type meteredConn struct {
	net.Conn
	m        *metrics
	scheme   string
	in, out  prometheus.Counter
	open     prometheus.Gauge
	quic     quicStatser
	closeOne sync.Once
	writing  atomic.Int64 // UnixNano when the current Write began; 0 when none is in progress
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.in.Add(float64(n))
	}
	return n, err
}

func (c *meteredConn) Write(p []byte) (int, error) {
	c.writing.Store(time.Now().UnixNano())
	n, err := c.Conn.Write(p)
	c.writing.Store(0)
	if n > 0 {
		c.out.Add(float64(n))
	}
	return n, err
}

// WriteBlockedFor implements engine.WriteWatcher: it reports how long the current Write has been blocked (0
// if no Write is in progress).
func (c *meteredConn) WriteBlockedFor(now int64) time.Duration {
	st := c.writing.Load()
	if st == 0 {
		return 0
	}
	return time.Duration(now - st)
}

// SetDeadline sets only the read deadline. The engine calls SetDeadline
// from a client's read goroutine (keep-alive) while its write goroutine may
// be writing; some transports (gorilla WebSocket) do not allow a write
// deadline to change during a write. Dropping the write deadline is safe:
// a dead peer trips the read deadline, and the engine then closes the
// connection, which ends any blocked write; slow readers are handled by
// the slow-consumer policy.
func (c *meteredConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

// SyscallConn returns the socket of a plain TCP connection, whose reads
// come straight from it, so that an idle client can give its goroutine up
// and wait in the engine's poller (mochi fork patch 18). Other
// connections (TLS, WebSocket, QUIC) buffer data of their own and report
// an error: their clients keep a goroutine.
func (c *meteredConn) SyscallConn() (syscall.RawConn, error) {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.SyscallConn()
	}
	return nil, errNotPlainSocket
}

// WrittenDirectly counts the bytes the engine wrote to the socket
// (SyscallConn) without calling Write: deliveries its readers write
// without waiting (mochi fork patch 40).
func (c *meteredConn) WrittenDirectly(n int) {
	if n > 0 {
		c.out.Add(float64(n))
	}
}

// ReadDirectly counts the bytes the engine read from the socket
// (SyscallConn) without calling Read: input a client's reader takes
// without waiting (mochi fork patch 46).
func (c *meteredConn) ReadDirectly(n int) {
	if n > 0 {
		c.in.Add(float64(n))
	}
}

// NotifyReadable passes through to a connection that can wake a parked
// client itself (multi-stream QUIC: the transport's goroutines receive
// the streams), so that its client gives its goroutine up too; false for
// any other.
func (c *meteredConn) NotifyReadable(f func()) bool {
	if rn, ok := c.Conn.(interface{ NotifyReadable(func()) bool }); ok {
		return rn.NotifyReadable(f)
	}
	return false
}

// errNotPlainSocket: the connection is not a plain socket (SyscallConn).
var errNotPlainSocket = errors.New("broker: not a plain socket")

// QUICStats passes through the statistics of a QUIC connection.
func (c *meteredConn) QUICStats() (transport.QUICStats, bool) {
	if c.quic == nil {
		return transport.QUICStats{}, false
	}
	return c.quic.QUICStats()
}

func (c *meteredConn) Close() error {
	err := c.Conn.Close()
	c.closeOne.Do(func() {
		c.open.Dec()
		switch ic := c.Conn.(type) {
		case interface{ Info() transport.Info }:
			info := ic.Info()
			if info.Used0RTT {
				c.m.early.Inc()
			}
			if info.TLSResumed {
				c.m.resumed.WithLabelValues(c.scheme).Inc()
			}
		case interface{ ConnectionState() tls.ConnectionState }:
			if ic.ConnectionState().DidResume {
				c.m.resumed.WithLabelValues(c.scheme).Inc()
			}
		}
		if c.quic != nil {
			if st, ok := c.quic.QUICStats(); ok {
				c.m.quicLost.Add(float64(st.PacketsLost))
			}
			c.m.mu.Lock()
			delete(c.m.quicConns, c)
			c.m.mu.Unlock()
		}
	})
	return err
}

// engineCollector exports engine gauges and QUIC path statistics at scrape
// time.
type engineCollector struct{ m *metrics }

var (
	descClients  = prometheus.NewDesc("iotq_broker_clients_connected", "Connected MQTT clients (engine count).", nil, nil)
	descSubs     = prometheus.NewDesc("iotq_broker_subscriptions", "Active subscriptions.", nil, nil)
	descRetained = prometheus.NewDesc("iotq_broker_retained_messages", "Retained messages stored.", nil, nil)
	descInflight = prometheus.NewDesc("iotq_broker_inflight_messages", "QoS 1/2 messages in flight or queued for offline sessions.", nil, nil)
	descQueued   = prometheus.NewDesc("iotq_broker_queued_bytes", "Payload and topic bytes held for delivery by sessions (connected and offline): stat=sum over all, stat=max of the largest (limits.max_queued_bytes).", []string{"stat"}, nil)
	descInflDrop = prometheus.NewDesc("iotq_broker_inflight_dropped_total", "QoS 1/2 messages not stored because a client's in-flight store was full.", nil, nil)
	descPanics   = prometheus.NewDesc("iotq_broker_client_panics_total", "Internal errors (recovered panics) while serving a client; each closed that client's connection only.", nil, nil)
	descQUICRTT  = prometheus.NewDesc("iotq_broker_quic_smoothed_rtt_seconds", "Smoothed RTT over open QUIC connections (stat=mean or max).", []string{"stat"}, nil)
	descQUICLost = prometheus.NewDesc("iotq_broker_quic_open_packets_lost", "Packets lost so far on open QUIC connections.", nil, nil)
	descQUICOpen = prometheus.NewDesc("iotq_broker_quic_connections_with_stats", "Open QUIC connections that report statistics.", nil, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClients, descSubs, descRetained, descInflight, descQueued, descInflDrop, descPanics, descQUICRTT, descQUICLost, descQUICOpen} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	if r := c.m.eng.Load(); r != nil {
		st := r.e.Stats()
		ch <- prometheus.MustNewConstMetric(descClients, prometheus.GaugeValue, float64(st.ClientsConnected))
		ch <- prometheus.MustNewConstMetric(descSubs, prometheus.GaugeValue, float64(st.Subscriptions))
		ch <- prometheus.MustNewConstMetric(descRetained, prometheus.GaugeValue, float64(st.Retained))
		ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(st.Inflight))
		ch <- prometheus.MustNewConstMetric(descInflDrop, prometheus.CounterValue, float64(st.InflightDropped))
		ch <- prometheus.MustNewConstMetric(descPanics, prometheus.CounterValue, float64(st.ClientPanics))
		sum, largest := r.e.QueuedBytes()
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(sum), "sum")
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(largest), "max")
	}
	c.m.mu.Lock()
	conns := make([]*meteredConn, 0, len(c.m.quicConns))
	for mc := range c.m.quicConns {
		conns = append(conns, mc)
	}
	c.m.mu.Unlock()
	var sum, maxRTT float64
	var lost uint64
	n := 0
	for _, mc := range conns {
		st, ok := mc.QUICStats()
		if !ok {
			continue
		}
		n++
		r := st.SmoothedRTT.Seconds()
		sum += r
		maxRTT = max(maxRTT, r)
		lost += st.PacketsLost
	}
	mean := 0.0
	if n > 0 {
		mean = sum / float64(n)
	}
	ch <- prometheus.MustNewConstMetric(descQUICRTT, prometheus.GaugeValue, mean, "mean")
	ch <- prometheus.MustNewConstMetric(descQUICRTT, prometheus.GaugeValue, maxRTT, "max")
	ch <- prometheus.MustNewConstMetric(descQUICLost, prometheus.GaugeValue, float64(lost))
	ch <- prometheus.MustNewConstMetric(descQUICOpen, prometheus.GaugeValue, float64(n))
}
