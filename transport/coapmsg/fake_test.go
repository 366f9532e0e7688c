package coapmsg

import (
	"net"
	"sort"
	"sync"
	"time"
)

// fakeClock is a manual clock: timers fire when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock forward by d, firing due timers in order (each
// synchronously, at its own instant).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		var next *fakeTimer
		for i, t := range c.timers {
			if t.stopped {
				continue
			}
			if !t.at.After(end) {
				next = t
				c.timers = append(c.timers[:i:i], c.timers[i+1:]...)
			}
			break
		}
		if next == nil {
			// drop stopped timers
			live := c.timers[:0]
			for _, t := range c.timers {
				if !t.stopped {
					live = append(live, t)
				}
			}
			c.timers = live
			c.now = end
			c.mu.Unlock()
			return
		}
		next.stopped = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}

type sent struct {
	at   time.Time
	data []byte
	to   net.Addr
}

// fakeConn is a PacketConn whose writes are recorded with the fake clock's
// time and whose reads come from inject.
type fakeConn struct {
	clock  *fakeClock
	mu     sync.Mutex
	writes []sent
	in     chan sent
	done   chan struct{}
	once   sync.Once
}

func newFakeConn(c *fakeClock) *fakeConn {
	return &fakeConn{clock: c, in: make(chan sent, 16), done: make(chan struct{})}
}

func (f *fakeConn) inject(from net.Addr, data []byte) { f.in <- sent{data: data, to: from} }

func (f *fakeConn) sent() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.writes...)
}

func (f *fakeConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case s := <-f.in:
		return copy(p, s.data), s.to, nil
	case <-f.done:
		return 0, nil, net.ErrClosed
	}
}

func (f *fakeConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, sent{at: f.clock.Now(), data: append([]byte(nil), p...), to: addr})
	return len(p), nil
}

func (f *fakeConn) Close() error                     { f.once.Do(func() { close(f.done) }); return nil }
func (f *fakeConn) LocalAddr() net.Addr              { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (f *fakeConn) SetDeadline(time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(time.Time) error { return nil }
