package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// proxyConn is one forwarded QUIC connection. serve runs on a goroutine of
// the gateway and starts two more (one per direction), which it waits for.
type proxyConn struct {
	g  *Gateway
	rt *route
	qc transport.QUICConn
	q  *qconn // nil if the listener did not report the connection

	last   atomic.Int64 // unix nanoseconds of the last application data read, either side
	fromUp atomic.Int64 // bytes read from the upstream

	mu      sync.Mutex // guards up, aborted, reason
	up      *upConn
	aborted bool
	reason  string
}

// direction results.
type pumpResult struct {
	toUpstream bool
	readErr    error // reading the source failed (not EOF)
	writeErr   error // writing the destination failed
}

func (pc *proxyConn) serve() {
	rt, m, o := pc.rt, pc.g.met, pc.g.opts
	m.conns.WithLabelValues(rt.label).Inc()
	open := m.open.WithLabelValues(rt.label)
	open.Inc()
	defer open.Dec()

	// No upstream connection before the client's first bytes (or the end
	// of its stream): the first-data timeout (qconn.watch) closes a
	// client that sends nothing.
	first := make([]byte, min(initialBuffer, o.BufferSize))
	n, firstErr := pc.qc.Read(first)
	first = first[:n]
	if n == 0 && firstErr != nil && !errors.Is(firstErr, io.EOF) {
		rt.log.Debug("client connection failed before sending data", "client", pc.qc.RemoteAddr().String(), "error", firstErr)
		pc.abort(CodeStreamError, "client stream failed", reasonClientErr)
		return
	}
	if pc.q != nil {
		pc.q.markData()
	}
	pc.touch()

	up, err := rt.dial(pc.g.ctx, pc.qc.RemoteAddr(), pc.qc.LocalAddr())
	if err != nil {
		pc.abort(CodeUpstreamUnavailable, upstreamDownReason(pc.qc.Info().NegotiatedProto), reasonNoUp)
		return
	}
	pc.mu.Lock()
	if pc.aborted { // Close ran meanwhile
		pc.mu.Unlock()
		_ = up.Close()
		return
	}
	pc.up = up
	pc.mu.Unlock()

	results := make(chan pumpResult, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		results <- pc.pump(up, pc.qc, true, m.bytes.WithLabelValues(rt.label, dirToUpstream), first, firstErr)
	}()
	go func() {
		defer wg.Done()
		results <- pc.pump(pc.qc, up, false, m.bytes.WithLabelValues(rt.label, dirToClient), nil, nil)
	}()
	defer wg.Wait()

	// Application data idle: PINGs keep the QUIC connection alive but do
	// not pass through here.
	idle := time.NewTimer(o.DataIdleTimeout)
	defer idle.Stop()
	idleC := idle.C
	var halfC <-chan time.Time
	var clientEnded bool // the client ended its direction normally
	hs := pc.qc.HandshakeComplete()
	for done := 0; done < 2; {
		select {
		case <-hs:
			hs = nil
			if pc.qc.Info().Used0RTT {
				m.early.WithLabelValues(rt.label, earlyAccepted).Inc()
			}
		case <-idleC:
			if rem := o.DataIdleTimeout - time.Since(time.Unix(0, pc.last.Load())); rem > 0 {
				idle.Reset(rem)
				continue
			}
			idleC = nil
			msg := fmt.Sprintf("no application data in either direction for %s (data_idle_timeout; QUIC PINGs do not count)", o.DataIdleTimeout)
			if pc.abort(CodeIdleTimeout, msg, reasonIdle) {
				m.timeouts.WithLabelValues(rt.label, timeoutIdle).Inc()
				rt.log.Debug("data idle timeout", "client", pc.qc.RemoteAddr().String(), "timeout", o.DataIdleTimeout)
			}
		case <-halfC:
			halfC = nil
			msg := fmt.Sprintf("the other side did not end its stream within %s of the first end (half_close_timeout)", o.HalfCloseTimeout)
			if pc.abort(CodeHalfCloseTimeout, msg, reasonHalfClose) {
				m.timeouts.WithLabelValues(rt.label, timeoutHalf).Inc()
				rt.log.Debug("half-close timeout", "client", pc.qc.RemoteAddr().String(), "timeout", o.HalfCloseTimeout)
			}
		case r := <-results:
			done++
			noProxy := rt.r.ProxyProtocol && pc.fromUp.Load() == 0 && !clientEnded
			switch {
			case r.readErr == nil && r.writeErr == nil && !r.toUpstream && noProxy:
				// The upstream ended before answering anything while the
				// client still talks: it probably read the PROXY header
				// as garbage.
				pc.noProxyProtocol(nil)
			case r.readErr == nil && r.writeErr == nil:
				// EOF from the source: pass the FIN on; the other side has
				// HalfCloseTimeout to end its own.
				if r.toUpstream {
					clientEnded = true
					_ = up.CloseWrite()
				} else {
					_ = pc.qc.CloseWrite()
				}
				if done == 1 {
					halfC = time.After(o.HalfCloseTimeout)
				}
			case (r.toUpstream && r.writeErr != nil) || (!r.toUpstream && r.readErr != nil):
				if noProxy {
					pc.noProxyProtocol(errors.Join(r.readErr, r.writeErr))
					break
				}
				rt.log.Debug("upstream connection failed", "client", pc.qc.RemoteAddr().String(), "error", errors.Join(r.readErr, r.writeErr))
				pc.abort(CodeUpstreamReset, "upstream connection failed", reasonUpReset)
			default:
				rt.log.Debug("client connection failed", "client", pc.qc.RemoteAddr().String(), "error", errors.Join(r.readErr, r.writeErr))
				pc.abort(CodeStreamError, "client stream failed", reasonClientErr)
			}
		}
	}
	pc.mu.Lock()
	aborted := pc.aborted
	pc.mu.Unlock()
	if !aborted {
		m.closed.WithLabelValues(rt.label, reasonNormal).Inc()
		_ = pc.qc.Close()
		_ = up.Close()
	}
}

// noProxyProtocol ends a connection whose upstream closed (or reset it)
// before sending a byte although a PROXY protocol header went first: the
// usual sign of an upstream that does not read PROXY protocol. The hint
// is logged at info level at most once a minute per route, and is the
// client's reason.
func (pc *proxyConn) noProxyProtocol(err error) {
	const msg = "upstream closed the connection before answering: it probably does not speak PROXY protocol (proxy_protocol is on for this gateway route)"
	rt := pc.rt
	if ok, suppressed := rt.proxyHint.allow(time.Now()); ok {
		attrs := []any{"client", pc.qc.RemoteAddr().String(), "hint", "turn proxy_protocol off for this route, or enable PROXY protocol v2 on the broker"}
		if err != nil {
			attrs = append(attrs, "error", err)
		}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
		rt.log.Info("upstream closed right after the PROXY protocol header; it probably does not speak PROXY protocol", attrs...)
	}
	pc.abort(CodeUpstreamReset, msg, reasonNoProxy)
}

// touch records application data now.
func (pc *proxyConn) touch() { pc.last.Store(time.Now().UnixNano()) }

// pump copies src to dst through one buffer until EOF or an error; the
// buffer bounds what this direction holds, so a slow reader on dst stops
// reads on src and flow control pushes back on the sender. The buffer
// starts small (an idle connection holds little) and doubles, up to
// BufferSize, whenever a read fills it. first and firstErr are the result
// of a read already done on src.
func (pc *proxyConn) pump(dst, src net.Conn, toUpstream bool, count prometheus.Counter, first []byte, firstErr error) pumpResult {
	if len(first) > 0 {
		if _, werr := dst.Write(first); werr != nil {
			return pumpResult{toUpstream: toUpstream, writeErr: werr}
		}
		count.Add(float64(len(first)))
	}
	if errors.Is(firstErr, io.EOF) {
		return pumpResult{toUpstream: toUpstream}
	}
	if firstErr != nil {
		return pumpResult{toUpstream: toUpstream, readErr: firstErr}
	}
	buf := make([]byte, min(initialBuffer, pc.g.opts.BufferSize))
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pc.touch()
			if !toUpstream {
				pc.fromUp.Add(int64(n))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return pumpResult{toUpstream: toUpstream, writeErr: werr}
			}
			count.Add(float64(n))
			if n == len(buf) && len(buf) < pc.g.opts.BufferSize {
				buf = make([]byte, min(2*len(buf), pc.g.opts.BufferSize))
			}
		}
		if errors.Is(err, io.EOF) {
			return pumpResult{toUpstream: toUpstream}
		}
		if err != nil {
			return pumpResult{toUpstream: toUpstream, readErr: err}
		}
	}
}

// initialBuffer is the first copy buffer of a direction.
const initialBuffer = 2048

// abort ends the connection at once: the QUIC connection with code, the
// upstream connection closed. The first abort wins; later ones do nothing.
// It reports whether this call was the first.
func (pc *proxyConn) abort(code uint64, msg, reason string) bool {
	pc.mu.Lock()
	if pc.aborted {
		pc.mu.Unlock()
		return false
	}
	pc.aborted, pc.reason = true, reason
	up := pc.up
	pc.mu.Unlock()
	pc.g.met.closed.WithLabelValues(pc.rt.label, reason).Inc()
	_ = pc.qc.CloseWithError(code, msg)
	if up != nil {
		_ = up.Close()
	}
	return true
}

// upstreamDownReason is the reason phrase of CodeUpstreamUnavailable. It
// names the broker by the connection's ALPN, because the client's own hint
// after it may point at the wrong thing (its port, its protocol): the port
// is right, the broker behind the gateway is not there.
func upstreamDownReason(alpn string) string {
	broker := "broker"
	switch alpn {
	case transport.ALPN:
		broker = "MQTT broker"
	case endpoint.ALPNAMQP:
		broker = "AMQP broker"
	}
	return "no upstream reachable: the gateway could not connect to the " + broker + " behind this route (see the gateway's log)"
}
