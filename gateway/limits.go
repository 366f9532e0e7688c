package gateway

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// tracker counts the gateway's QUIC connections (for the caps), the
// handshakes in progress and the rate of new connection attempts (for
// Retry), over all routes. Safe for concurrent use.
type tracker struct {
	o Options // with defaults

	mu          sync.Mutex
	total       int
	perSource   map[string]int
	handshaking int
	byCtx       map[context.Context]*qconn // by the QUIC connection's context
	// rate of new attempts: counts in the current and the previous
	// one-second window.
	winStart  time.Time
	cur, prev int
	// recent remembers the decision for addresses seen in the last second:
	// a client's first flight is often two Initial packets (a large
	// ClientHello), each asking for a decision; they count as one attempt
	// and get the same answer.
	recent map[string]attemptSeen
}

type attemptSeen struct {
	at    time.Time
	retry bool
}

// maxRecent bounds tracker.recent; past it (a flood from many addresses)
// every packet counts as an attempt, which only turns Retry on sooner.
const maxRecent = 4096

func newTracker(o Options) *tracker {
	return &tracker{o: o, perSource: map[string]int{}, byCtx: map[context.Context]*qconn{}, recent: map[string]attemptSeen{}}
}

// qconn is one QUIC connection from the listener's accept to its end.
type qconn struct {
	rt      *route
	conn    *quic.Conn
	source  string // client IP address ("" if not IP)
	refused string // reason of a refusal by a cap ("" if admitted)
	data    chan struct{}

	mu       sync.Mutex // guards the fields below
	dataSeen bool       // the first application bytes (or FIN) arrived
	expired  bool       // the first-data timeout closed it
	pc       *proxyConn // set when its stream is served
	hsDone   bool       // counted out of the handshakes in progress
}

// sourceOf is the client's IP address as a map key.
func sourceOf(a net.Addr) string {
	if ap, ok := addrPort(a); ok {
		return ap.Addr().String()
	}
	return ""
}

// admit counts a new connection from source, or returns the limit it
// would exceed and a reason for the client.
func (t *tracker) admit(source string) (limit, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.o.MaxConnections > 0 && t.total >= t.o.MaxConnections {
		return limitTotal, fmt.Sprintf("connection limit reached: max_connections (%d) on this gateway", t.o.MaxConnections)
	}
	if source != "" && t.o.MaxConnectionsPerSource > 0 && t.perSource[source] >= t.o.MaxConnectionsPerSource {
		return limitPerSource, fmt.Sprintf("connection limit reached: max_connections_per_source (%d) from %s", t.o.MaxConnectionsPerSource, source)
	}
	t.total++
	if source != "" {
		t.perSource[source]++
	}
	return "", ""
}

func (t *tracker) release(source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total--
	if source != "" {
		if t.perSource[source]--; t.perSource[source] <= 0 {
			delete(t.perSource, source)
		}
	}
}

func (t *tracker) handshakeStart() {
	t.mu.Lock()
	t.handshaking++
	t.mu.Unlock()
}

func (t *tracker) handshakeEnd() {
	t.mu.Lock()
	t.handshaking--
	t.mu.Unlock()
}

// attempt records a new connection attempt from addr (an Initial packet
// without a valid token) and says whether it must be validated with a
// Retry, and whether it was a new attempt (not a second Initial packet of
// one already seen).
func (t *tracker) attempt(addr string, now time.Time) (retry, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.recent[addr]; ok && now.Sub(s.at) < time.Second && now.Sub(s.at) >= 0 {
		return s.retry, false
	}
	switch el := now.Sub(t.winStart); {
	case el >= 2*time.Second || el < 0:
		t.winStart, t.prev, t.cur = now, 0, 0
		clear(t.recent)
	case el >= time.Second:
		t.winStart, t.prev, t.cur = t.winStart.Add(time.Second), t.cur, 0
		for a, s := range t.recent {
			if now.Sub(s.at) >= time.Second {
				delete(t.recent, a)
			}
		}
	}
	t.cur++
	switch t.o.Retry {
	case RetryAlways:
		retry = true
	case RetryNever:
		retry = false
	default:
		// Sliding one-second estimate: the part of the previous window
		// still inside the last second, plus the current one.
		frac := float64(now.Sub(t.winStart)) / float64(time.Second)
		rate := float64(t.prev)*(1-frac) + float64(t.cur)
		retry = rate > float64(t.o.RetryRate) || t.handshaking > t.o.RetryHandshakes
	}
	if len(t.recent) < maxRecent {
		t.recent[addr] = attemptSeen{at: now, retry: retry}
	}
	return retry, true
}

func (t *tracker) put(q *qconn) {
	t.mu.Lock()
	t.byCtx[q.conn.Context()] = q
	t.mu.Unlock()
}

func (t *tracker) remove(q *qconn) {
	t.mu.Lock()
	delete(t.byCtx, q.conn.Context())
	t.mu.Unlock()
}

// lookup finds the qconn of an accepted stream's connection.
func (t *tracker) lookup(ctx context.Context) *qconn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byCtx[ctx]
}

// verifySource is the listener's VerifySourceAddress: true sends a Retry.
func (rt *route) verifySource(a net.Addr) bool {
	retry, fresh := rt.g.track.attempt(a.String(), time.Now())
	if retry && fresh {
		rt.g.met.retries.WithLabelValues(rt.label).Inc()
	}
	return retry
}

// acceptConn is the listener's AcceptConn: it counts the connection
// against the caps (or marks it refused) and starts its watcher. It runs
// on the listener's accept loop, which ends before the gateway's Close
// waits for its goroutines.
func (rt *route) acceptConn(conn *quic.Conn) {
	g := rt.g
	q := &qconn{rt: rt, conn: conn, source: sourceOf(conn.RemoteAddr()), data: make(chan struct{})}
	limit, reason := g.track.admit(q.source)
	if limit != "" {
		q.refused = reason
		g.met.refused.WithLabelValues(rt.label, limit).Inc()
		rt.log.Debug("connection refused", "client", conn.RemoteAddr().String(), "limit", limit)
	} else {
		g.met.quicConns.WithLabelValues(rt.label).Inc()
	}
	g.track.handshakeStart()
	g.met.handshakes.WithLabelValues(rt.label).Inc()
	g.track.put(q)
	g.life.Go(q.watch)
}

// watch follows one QUIC connection until it ends: the end of its
// handshake, the refusal of a connection past a cap (sent once the
// handshake completed, so the client can read the reason), the first-data
// timeout, and the counts when it ends.
func (q *qconn) watch() {
	rt, g := q.rt, q.rt.g
	defer func() {
		q.handshakeEnd()
		g.track.remove(q)
		if q.refused == "" {
			g.track.release(q.source)
			g.met.quicConns.WithLabelValues(rt.label).Dec()
		}
	}()
	done := q.conn.Context().Done()
	select {
	case <-q.conn.HandshakeComplete():
	case <-done:
		return
	case <-g.ctx.Done():
		q.close(CodeShutdown, "gateway shutting down")
		return
	}
	q.handshakeEnd()
	if q.refused != "" {
		q.close(CodeConnectionLimit, q.refused)
		return
	}
	t := time.NewTimer(g.opts.FirstDataTimeout)
	defer t.Stop()
	select {
	case <-q.data:
	case <-t.C:
		q.expire()
	case <-done:
		return
	case <-g.ctx.Done():
		q.close(CodeShutdown, "gateway shutting down")
		return
	}
	select {
	case <-done:
	case <-g.ctx.Done():
		q.close(CodeShutdown, "gateway shutting down")
	}
}

func (q *qconn) handshakeEnd() {
	q.mu.Lock()
	was := q.hsDone
	q.hsDone = true
	q.mu.Unlock()
	if !was {
		q.rt.g.track.handshakeEnd()
		q.rt.g.met.handshakes.WithLabelValues(q.rt.label).Dec()
	}
}

// markData records that the first application bytes (or the stream's
// end) arrived: the first-data timeout no longer applies.
func (q *qconn) markData() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.dataSeen {
		q.dataSeen = true
		close(q.data)
	}
}

// attach links the proxyConn serving the connection's stream; false if
// the first-data timeout already closed the connection.
func (q *qconn) attach(pc *proxyConn) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.expired {
		return false
	}
	q.pc = pc
	return true
}

// expire closes a connection that sent no data in time.
func (q *qconn) expire() {
	q.mu.Lock()
	if q.dataSeen || q.expired {
		q.mu.Unlock()
		return
	}
	q.expired = true
	pc := q.pc
	q.mu.Unlock()
	d := q.rt.g.opts.FirstDataTimeout
	msg := fmt.Sprintf("no data within %s of the handshake (first_data_timeout)", d)
	q.rt.log.Debug("first-data timeout", "client", q.conn.RemoteAddr().String(), "timeout", d)
	q.rt.g.met.timeouts.WithLabelValues(q.rt.label, timeoutFirst).Inc()
	if pc != nil {
		pc.abort(CodeFirstDataTimeout, msg, reasonFirstData)
		return
	}
	q.close(CodeFirstDataTimeout, msg)
}

// hintLimiter lets one log line through per interval and counts the rest.
type hintLimiter struct {
	every      time.Duration
	last       atomic.Int64 // unix nanoseconds of the last line
	suppressed atomic.Int64
}

// allow reports whether to log now, and how many were suppressed since
// the last line.
func (h *hintLimiter) allow(now time.Time) (bool, int64) {
	last := h.last.Load()
	if last != 0 && now.UnixNano()-last < int64(h.every) {
		h.suppressed.Add(1)
		return false, 0
	}
	if !h.last.CompareAndSwap(last, now.UnixNano()) {
		h.suppressed.Add(1)
		return false, 0
	}
	return true, h.suppressed.Swap(0)
}

// close closes the QUIC connection with an application error.
func (q *qconn) close(code uint64, msg string) {
	_ = q.conn.CloseWithError(quic.ApplicationErrorCode(code), msg)
}
