package gateway

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iotq/iotq/transport"
)

// proxyConn is one forwarded QUIC connection. serve runs on a goroutine of
// the gateway and starts two more (one per direction), which it waits for.
type proxyConn struct {
	g  *Gateway
	rt *route
	qc transport.QUICConn

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
	rt, m := pc.rt, pc.g.met
	m.conns.WithLabelValues(rt.label).Inc()
	open := m.open.WithLabelValues(rt.label)
	open.Inc()
	defer open.Dec()

	up, err := rt.dial(pc.g.ctx, pc.qc.RemoteAddr(), pc.qc.LocalAddr())
	if err != nil {
		pc.abort(CodeUpstreamUnavailable, "no upstream reachable", reasonNoUp)
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
		results <- pc.pump(up, pc.qc, true, m.bytes.WithLabelValues(rt.label, dirToUpstream))
	}()
	go func() {
		defer wg.Done()
		results <- pc.pump(pc.qc, up, false, m.bytes.WithLabelValues(rt.label, dirToClient))
	}()
	defer wg.Wait()

	hs := pc.qc.HandshakeComplete()
	for done := 0; done < 2; {
		select {
		case <-hs:
			hs = nil
			if pc.qc.Info().Used0RTT {
				m.early.WithLabelValues(rt.label, earlyAccepted).Inc()
			}
		case r := <-results:
			done++
			switch {
			case r.readErr == nil && r.writeErr == nil:
				// EOF from the source: pass the FIN on.
				if r.toUpstream {
					_ = up.CloseWrite()
				} else {
					_ = pc.qc.CloseWrite()
				}
			case (r.toUpstream && r.writeErr != nil) || (!r.toUpstream && r.readErr != nil):
				rt.log.Debug("upstream connection failed", "client", pc.qc.RemoteAddr().String(), "err", errors.Join(r.readErr, r.writeErr))
				pc.abort(CodeUpstreamReset, "upstream connection failed", reasonUpReset)
			default:
				rt.log.Debug("client connection failed", "client", pc.qc.RemoteAddr().String(), "err", errors.Join(r.readErr, r.writeErr))
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

// pump copies src to dst through one buffer until EOF or an error; the
// buffer bounds what this direction holds, so a slow reader on dst stops
// reads on src and flow control pushes back on the sender. The buffer
// starts small (an idle connection holds little) and doubles, up to
// BufferSize, whenever a read fills it.
func (pc *proxyConn) pump(dst, src net.Conn, toUpstream bool, count prometheus.Counter) pumpResult {
	buf := make([]byte, min(initialBuffer, pc.g.opts.BufferSize))
	for {
		n, err := src.Read(buf)
		if n > 0 {
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
func (pc *proxyConn) abort(code uint64, msg, reason string) {
	pc.mu.Lock()
	if pc.aborted {
		pc.mu.Unlock()
		return
	}
	pc.aborted, pc.reason = true, reason
	up := pc.up
	pc.mu.Unlock()
	pc.g.met.closed.WithLabelValues(pc.rt.label, reason).Inc()
	_ = pc.qc.CloseWithError(code, msg)
	if up != nil {
		_ = up.Close()
	}
}
