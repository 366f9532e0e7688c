package mochi

import (
	"sync"
	"sync/atomic"
	"time"
)

// signal wakes goroutines waiting for "something changed". notify is cheap
// when nobody waits (one atomic load), so it can run per packet.
type signal struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{} // nil while nobody waits
}

// wait returns a channel closed by the next notify. Check the condition
// again after calling wait and before blocking, or a notify in between is
// missed.
func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
		s.waiting.Store(true)
	}
	return s.ch
}

func (s *signal) notify() {
	if !s.waiting.Load() {
		return
	}
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
		s.waiting.Store(false)
	}
	s.mu.Unlock()
}

// counter is a count that others can wait to see at zero.
type counter struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n == 0
}

func newCounter() *counter {
	z := make(chan struct{})
	close(z)
	return &counter{zero: z}
}

func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.n
	c.n += d
	switch {
	case was == 0 && c.n > 0:
		c.zero = make(chan struct{})
	case was > 0 && c.n <= 0:
		c.n = 0
		close(c.zero)
	}
}

// waitZero waits until the count is zero or timeout passes, and reports
// whether it saw zero.
func (c *counter) waitZero(timeout time.Duration) bool {
	c.mu.Lock()
	z := c.zero
	c.mu.Unlock()
	select {
	case <-z:
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-z:
		return true
	case <-t.C:
		return false
	}
}
