package transport

import "sync"

// What an idle multi-stream QUIC connection holds on the server (issue 21):
// the MQTT engine's reader may give its goroutine up (NotifyReadable), and
// the control stream's reader waits on a small buffer (ctlBuffer).

// NotifyReadable arranges for f to be called once, on any goroutine, as
// soon as Read would not block: a packet queued from the control stream
// (or, once CONNECT was read, from a data stream or a datagram), the
// control stream's end or error, or Close; at once if that is so already.
// NotifyReadable(nil) drops the registration. It always reports true: the
// conn's own goroutines receive everything Read returns, so the engine's
// reader need not wait in Read (mqttcore parks it, patch 38). Call it from
// the reader's goroutine, between Reads.
func (m *muxConn) NotifyReadable(f func()) bool {
	m.nmu.Lock()
	m.notify = f
	m.nmu.Unlock()
	if f != nil && m.readable() {
		m.fireNotify()
	}
	return true
}

// fireNotify calls the registered function, once. A producer calls it
// after queueing: it takes nmu after its send, and NotifyReadable checks
// the queues after releasing nmu, so one of the two sees the other.
func (m *muxConn) fireNotify() {
	m.nmu.Lock()
	f := m.notify
	m.notify = nil
	m.nmu.Unlock()
	if f != nil {
		f()
	}
}

// readable reports whether Read would return without waiting. Reader
// state; call between Reads.
func (m *muxConn) readable() bool {
	if len(m.cur) > 0 || m.held != nil || m.rerr != nil || len(m.ctl) > 0 {
		return true
	}
	if m.firstDone && !m.ctlOnly {
		if p := m.dataq.Load(); p != nil && len(*p) > 0 {
			return true
		}
	}
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// dataChan returns the channel of packets from data streams and
// datagrams, made on first use (an idle single-stream session holds
// none: 64 items are 3 KiB).
func (m *muxConn) dataChan() chan muxItem {
	m.dataOnce.Do(func() {
		ch := make(chan muxItem, 64)
		m.dataq.Store(&ch)
		close(m.dataReady)
	})
	return *m.dataq.Load()
}

// dataNow returns the data channel if it was made; else nil and a channel
// closed when it is.
func (m *muxConn) dataNow() (chan muxItem, <-chan struct{}) {
	if p := m.dataq.Load(); p != nil {
		return *p, nil
	}
	return nil, m.dataReady
}

// ctlBuffer is the control stream reader's buffer: a small one of its own
// while reads are small (what an idle client holds: ctlSmall bytes, not
// 16 KiB), a full-size one from the listener's pool after a read that
// filled the small one, back to the pool after a read that would have fit
// the small one. What was read is copied out before the next read, so the
// buffer may change between reads.
type ctlBuffer struct {
	pool  *sync.Pool // of *[]byte of ctlBig bytes
	big   *[]byte
	small []byte
}

const (
	ctlSmall = 512
	ctlBig   = 16 << 10
)

// newCtlBufferPool returns the pool of full-size buffers of a listener.
func newCtlBufferPool() *sync.Pool {
	return &sync.Pool{New: func() any { b := make([]byte, ctlBig); return &b }}
}

// next returns the buffer for the next read, given what the last read
// returned.
func (b *ctlBuffer) next(last int) []byte {
	if b.big != nil && last < ctlSmall {
		b.pool.Put(b.big) // light traffic: wait on the small buffer
		b.big = nil
	}
	if b.big == nil && b.small != nil && last == len(b.small) {
		b.big = b.pool.Get().(*[]byte) // the small one came back full: more is likely waiting
	}
	if b.big != nil {
		return *b.big
	}
	if b.small == nil {
		b.small = make([]byte, ctlSmall)
	}
	return b.small
}

// release gives the full-size buffer back; the buffer is not used again.
func (b *ctlBuffer) release() {
	if b.big != nil {
		b.pool.Put(b.big)
		b.big = nil
	}
	b.small = nil
}
