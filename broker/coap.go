package broker

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net"
	"sync"

	"github.com/iotq/iotq/broker/coapfront"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/coapdtls"
	"github.com/iotq/iotq/transport/coapmsg"
	"github.com/iotq/iotq/transport/endpoint"
)

// The CoAP front (package broker/coapfront) shares the topic space: this
// file is its hook into the Server. coap://, coaps://, coap+tcp://,
// coaps+tcp:// and coap+quic:// listener URLs become CoAP listeners of one
// front; everything else goes to transport.Listen as before.

// coapState is the Server's CoAP front, created by the first CoAP listener
// and closed with the last one.
type coapState struct {
	mu        sync.Mutex
	front     *coapfront.Front
	refs      int
	collector bool // coapCollector registered
}

// topicsAdapter gives the front the topic space and the ACL.
type topicsAdapter struct{ s *Server }

func (a topicsAdapter) Publish(topic string, payload []byte, qos byte, retain bool) error {
	return a.s.Publish(Message{Topic: topic, Payload: payload, QoS: qos, Retain: retain})
}

func (a topicsAdapter) Subscribe(filter string, fn func(topic string, payload []byte)) (func(), error) {
	return a.s.Subscribe(filter, func(m Message) { fn(m.Topic, m.Payload) })
}

func (a topicsAdapter) Authorize(user string, anonymous bool, topic string, write bool) bool {
	if a.s.auth == nil {
		return true
	}
	if anonymous && !a.s.auth.Authenticate(nil, nil, false) {
		return false // anonymous clients are not allowed at all
	}
	return a.s.auth.Authorize(user, anonymous, topic, write)
}

// listen opens the listener of one URL: CoAP schemes here, the others in
// package transport.
func (s *Server) listen(raw string, lopts transport.ListenOptions) (transport.Listener, error) {
	ep, err := transport.ParseURL(raw)
	if err != nil || ep.Protocol != endpoint.ProtocolCoAP {
		return transport.Listen(raw, lopts)
	}
	s.coap.mu.Lock()
	if s.coap.front == nil {
		o := s.opts.CoAP
		o.Logger = s.log.With("component", "coap")
		f, err := coapfront.New(topicsAdapter{s}, o)
		if err != nil {
			s.coap.mu.Unlock()
			return nil, err
		}
		s.coap.front = f
		if !s.coap.collector {
			s.coap.collector = true
			if err := s.met.reg.Register(newCoAPCollector(s)); err != nil {
				s.log.Warn("coap metrics not registered", "error", err)
			}
		}
	}
	s.coap.refs++
	front := s.coap.front
	s.coap.mu.Unlock()
	l, err := s.listenCoAP(front, ep, lopts)
	if err != nil {
		s.releaseCoAP()
		return nil, err
	}
	return l, nil
}

func (s *Server) releaseCoAP() {
	s.coap.mu.Lock()
	defer s.coap.mu.Unlock()
	s.coap.refs--
	if s.coap.refs == 0 && s.coap.front != nil {
		_ = s.coap.front.Close()
		s.coap.front = nil
	}
}

// CoAPStats returns the CoAP front's counters (zero without CoAP listeners).
func (s *Server) CoAPStats() coapfront.Stats {
	s.coap.mu.Lock()
	f := s.coap.front
	s.coap.mu.Unlock()
	if f == nil {
		return coapfront.Stats{}
	}
	return f.Stats()
}

func (s *Server) listenCoAP(front *coapfront.Front, ep endpoint.Endpoint, lopts transport.ListenOptions) (transport.Listener, error) {
	l := &coapListener{s: s, ep: ep, done: make(chan struct{})}
	switch ep.Transport {
	case endpoint.TransportUDP:
		addr, err := front.ListenUDP(ep.Address())
		if err != nil {
			return nil, err
		}
		l.addr = addr
	case endpoint.TransportDTLS:
		psk, err := coapdtls.LoadPSKFile(s.opts.CoAP.PSKFile)
		if err != nil {
			return nil, fmt.Errorf("coaps listener: %w", err)
		}
		pc, err := coapdtls.Listen(ep.Address(), coapdtls.Config{PSK: psk, TLSConfig: lopts.TLSConfig, Logger: s.log,
			Sessions: s.opts.CoAP.DTLSSessions, SessionLifetime: s.opts.CoAP.DTLSSessionLifetime})
		if err != nil {
			return nil, err
		}
		if err := front.Serve(pc); err != nil {
			_ = pc.Close()
			return nil, err
		}
		l.addr = pc.LocalAddr()
	default: // RFC 8323: TCP, TLS, QUIC (experimental)
		inner := "mqtt://" + ep.Address()
		switch ep.Transport {
		case endpoint.TransportTLS:
			inner = "mqtts://" + ep.Address()
			if lopts.TLSConfig != nil {
				lopts.TLSConfig = lopts.TLSConfig.Clone()
				lopts.TLSConfig.NextProtos = []string{endpoint.ALPNCoAP}
			}
		case endpoint.TransportQUIC:
			inner = "quic://" + ep.Address()
			lopts.QUIC.NextProtos = []string{endpoint.ALPNCoAPQUIC}
		}
		tl, err := transport.Listen(inner, lopts)
		if err != nil {
			return nil, err
		}
		l.inner, l.addr = tl, tl.Addr()
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		log := s.log.With("listener", string(ep.Scheme)+"://"+tl.Addr().String())
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			serve.AcceptLoop(ctx, tl, log, func(c net.Conn) bool {
				if qc, ok := c.(transport.QUICConn); ok && s.opts.QUIC.EarlyData == records.EarlyHold {
					// hold (docs/0rtt.md): the CSM of a 0-RTT flight is
					// answered at once, requests behind it wait for the
					// handshake, so a replayed flight publishes nothing.
					c = transport.HoldAfterFirst(qc, coapmsg.StreamFirstMessage, s.met.earlyDropped.Inc)
				}
				front.ServeStreamOn(c, string(ep.Scheme)) // runs on a goroutine of the front
				return true
			})
		}()
	}
	switch a := l.addr.(type) {
	case *net.UDPAddr:
		l.ep.Port = a.Port
	case *net.TCPAddr:
		l.ep.Port = a.Port
	}
	return l, nil
}

// coapListener is a transport.Listener whose connections never reach the
// MQTT engine: Accept blocks until Close (the front serves its clients).
type coapListener struct {
	s      *Server
	ep     endpoint.Endpoint
	addr   net.Addr
	inner  transport.Listener // stream transports
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	done   chan struct{}
}

func (l *coapListener) Accept(ctx context.Context) (net.Conn, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *coapListener) Addr() net.Addr               { return l.addr }
func (l *coapListener) Endpoint() transport.Endpoint { return l.ep }

func (l *coapListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		if l.inner != nil {
			l.cancel()
			err = l.inner.Close()
			l.wg.Wait()
		}
		l.s.releaseCoAP()
	})
	return err
}

// coapCollector exports the CoAP front's counters on /metrics
// (iotq_broker_coap_*), read at scrape time. Requests, publishes,
// notifications and notification failures carry a transport label (the
// listener's URL scheme), the message-layer events one of coap (UDP) and
// coaps (DTLS).
type coapCollector struct {
	s         *Server
	counters  map[string]*prometheus.Desc
	observers *prometheus.Desc
	sessions  *prometheus.Desc
}

func newCoAPCollector(s *Server) coapCollector {
	tr := []string{"transport"}
	return coapCollector{s: s, counters: map[string]*prometheus.Desc{
		"requests":             prometheus.NewDesc("iotq_broker_coap_requests_total", "CoAP requests handled, by transport (listener URL scheme).", tr, nil),
		"publishes":            prometheus.NewDesc("iotq_broker_coap_publishes_total", "CoAP PUTs published into the topic space, by transport.", tr, nil),
		"notifications":        prometheus.NewDesc("iotq_broker_coap_notifications_total", "CoAP notifications sent, by transport.", tr, nil),
		"notify_failures":      prometheus.NewDesc("iotq_broker_coap_notification_failures_total", "Confirmable notifications not acknowledged (observer removed), by transport.", tr, nil),
		"coalesced":            prometheus.NewDesc("iotq_broker_coap_coalesced_total", "Notifications replaced by a newer value before they were sent.", nil, nil),
		"denied":               prometheus.NewDesc("iotq_broker_coap_denied_total", "CoAP requests refused by the ACL.", nil, nil),
		"observe_refused":      prometheus.NewDesc("iotq_broker_coap_observe_refused_total", "Observe registrations answered without Observe: the topic's max-subscribers was reached.", nil, nil),
		"expired":              prometheus.NewDesc("iotq_broker_coap_topics_expired_total", "Pub-sub topics deleted at their expiration-date.", nil, nil),
		"message_layer_events": prometheus.NewDesc("iotq_broker_coap_message_events_total", "CoAP message-layer events on UDP (transport coap) and DTLS (coaps) listeners (sent, received, retransmission, acknowledged, timeout, reset_received, reset_sent, duplicate, bad_datagram, bad_option, overload, stray, dedup_full).", []string{"event", "transport"}, nil),
		"dtls_handshakes":      prometheus.NewDesc("iotq_broker_coap_dtls_handshakes_total", "DTLS handshakes of coaps listeners: full, resumed (abbreviated, from a stored session) and failed.", []string{"kind"}, nil),
	}, observers: prometheus.NewDesc("iotq_broker_coap_observers", "Current CoAP observations.", nil, nil),
		sessions: prometheus.NewDesc("iotq_broker_coap_dtls_sessions", "DTLS sessions stored for resumption.", nil, nil)}
}

func (c coapCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.counters {
		ch <- d
	}
	ch <- c.observers
	ch <- c.sessions
}

func (c coapCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.CoAPStats()
	counter := func(name string, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.counters[name], prometheus.CounterValue, float64(v), labels...)
	}
	for scheme, t := range st.ByTransport {
		counter("requests", t.Requests, scheme)
		counter("publishes", t.Publishes, scheme)
		counter("notifications", t.Notifications, scheme)
		counter("notify_failures", t.NotifyFailures, scheme)
	}
	counter("coalesced", st.Coalesced)
	counter("denied", st.Denied)
	counter("observe_refused", st.ObserveRefused)
	counter("expired", st.Expired)
	for scheme, m := range st.MessageByTransport {
		for _, e := range []struct {
			name string
			v    int64
		}{{"sent", m.Sent}, {"received", m.Received}, {"retransmission", m.Retransmissions}, {"acknowledged", m.Acknowledged},
			{"timeout", m.Timeouts}, {"reset_received", m.ResetsReceived}, {"reset_sent", m.ResetsSent}, {"duplicate", m.Duplicates},
			{"bad_datagram", m.BadDatagrams}, {"bad_option", m.BadOptions}, {"overload", m.Overload}, {"stray", m.Stray},
			{"dedup_full", m.DedupFull}} {
			counter("message_layer_events", e.v, e.name, scheme)
		}
	}
	if _, ok := st.MessageByTransport["coaps"]; ok {
		counter("dtls_handshakes", st.DTLS.Handshakes-st.DTLS.Resumed, "full")
		counter("dtls_handshakes", st.DTLS.Resumed, "resumed")
		counter("dtls_handshakes", st.DTLS.HandshakeFailures, "failed")
		ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(st.DTLS.Sessions))
	}
	ch <- prometheus.MustNewConstMetric(c.observers, prometheus.GaugeValue, float64(st.Observers))
}
