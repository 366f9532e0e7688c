package transport

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// FirstMessageFunc tells HoldAfterFirst where the first message of a stream
// ends. Given the first bytes of the stream (prefix), it returns the total
// length of the first message if the prefix tells it (total > 0), or else
// how many more bytes it needs at least to tell (more > 0). An invalid
// prefix should return total = len(prefix): everything after it is held,
// and the protocol layer, which reads the prefix, rejects it.
type FirstMessageFunc func(prefix []byte) (total, more int)

// HoldAfterFirst wraps a QUIC conn accepted by a listener so that the
// layer above reads the stream's first message at once (it may arrive as
// 0-RTT early data, and the answer may go out at 0.5 RTT) but nothing after
// it until the QUIC handshake has completed. A replayed 0-RTT flight never
// completes the handshake (the replayer lacks the client's keys), so
// whatever it carried behind the first message is never read: Read waits,
// and returns an error when the connection ends (handshake timeout), Close
// is called or the read deadline passes. Once the handshake has completed,
// Read passes straight through. Reads are not split otherwise; like any
// net.Conn, one reader at a time.
//
// dropped, if not nil, is called once if the connection ended while a Read
// waited for the handshake (the mark of a replayed or abandoned 0-RTT
// flight).
//
// The policy, its guarantees and its limits: docs/0rtt.md ("hold").
func HoldAfterFirst(c QUICConn, first FirstMessageFunc, dropped func()) QUICConn {
	h := &holdConn{QUICConn: c, first: first, dropped: dropped, closing: make(chan struct{})}
	select {
	case <-c.HandshakeComplete():
		h.released.Store(true) // nothing early left to guard
	default:
	}
	return h
}

type holdConn struct {
	QUICConn
	first    FirstMessageFunc
	dropped  func()
	dropOnce sync.Once

	released atomic.Bool // handshake complete: pass through

	// Read side, used by the one reader only.
	prefix []byte // first bytes read, until the first message's length is known
	total  int    // length of the first message; 0 while unknown
	passed int    // bytes handed to the reader so far

	mu  sync.Mutex
	rdl time.Time // read deadline

	closing   chan struct{}
	closeOnce sync.Once
}

func (h *holdConn) Read(p []byte) (int, error) {
	if h.released.Load() || len(p) == 0 {
		return h.QUICConn.Read(p)
	}
	if h.total > 0 && h.passed >= h.total {
		if err := h.waitHandshake(); err != nil {
			return 0, err
		}
		h.released.Store(true)
		return h.QUICConn.Read(p)
	}
	limit := len(p)
	if h.total > 0 {
		limit = min(limit, h.total-h.passed)
	} else {
		_, more := h.first(h.prefix)
		limit = min(limit, max(more, 1))
	}
	n, err := h.QUICConn.Read(p[:limit])
	h.passed += n
	if h.total == 0 && n > 0 {
		h.prefix = append(h.prefix, p[:n]...)
		if total, _ := h.first(h.prefix); total > 0 {
			h.total = max(total, len(h.prefix))
			h.prefix = nil
		}
	}
	return n, err
}

// waitHandshake blocks until the handshake completes (nil) or the
// connection ends, Close is called or the read deadline passes.
func (h *holdConn) waitHandshake() error {
	h.mu.Lock()
	dl := h.rdl
	h.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-h.HandshakeComplete():
		return nil
	default:
	}
	select {
	case <-h.HandshakeComplete():
		return nil
	case <-h.Context().Done():
		if h.dropped != nil {
			h.dropOnce.Do(h.dropped)
		}
		return fmt.Errorf("quic: connection ended before the handshake confirmed the early data (replayed or abandoned 0-RTT flight): %w", context.Cause(h.Context()))
	case <-h.closing:
		return net.ErrClosed
	case <-timeout:
		return os.ErrDeadlineExceeded
	}
}

func (h *holdConn) SetReadDeadline(t time.Time) error {
	h.mu.Lock()
	h.rdl = t
	h.mu.Unlock()
	return h.QUICConn.SetReadDeadline(t)
}

func (h *holdConn) SetDeadline(t time.Time) error {
	h.mu.Lock()
	h.rdl = t
	h.mu.Unlock()
	return h.QUICConn.SetDeadline(t)
}

func (h *holdConn) Close() error {
	h.closeOnce.Do(func() { close(h.closing) })
	return h.QUICConn.Close()
}

func (h *holdConn) CloseWithError(code uint64, reason string) error {
	h.closeOnce.Do(func() { close(h.closing) })
	return h.QUICConn.CloseWithError(code, reason)
}

// MQTTFirstPacket is a FirstMessageFunc for MQTT (any version): the first
// packet is its fixed header (type byte and 1 to 4 bytes of remaining
// length) plus the remaining length. A remaining length longer than 4
// bytes is invalid: the prefix itself counts as the first packet, which
// the MQTT layer rejects; everything after it is held.
func MQTTFirstPacket(prefix []byte) (total, more int) {
	if len(prefix) < 2 {
		return 0, 2 - len(prefix)
	}
	n, mult := 0, 1
	for i := 1; i < len(prefix) && i <= 4; i++ {
		d := prefix[i]
		n += int(d&0x7f) * mult
		if d&0x80 == 0 {
			return 1 + i + n, 0
		}
		mult *= 128
	}
	if len(prefix) >= 5 {
		return len(prefix), 0
	}
	return 0, 1
}

// NotifyReadable passes through to the held conn (multi-stream QUIC) once
// the hold is released; before, Read may wait for the handshake, which
// nothing would notify, so it reports false (the reader keeps waiting in
// Read). NotifyReadable(nil) reports whether the held conn can notify.
func (h *holdConn) NotifyReadable(f func()) bool {
	rn, ok := h.QUICConn.(interface{ NotifyReadable(func()) bool })
	if !ok {
		return false
	}
	if f != nil && !h.released.Load() {
		return false
	}
	return rn.NotifyReadable(f)
}
