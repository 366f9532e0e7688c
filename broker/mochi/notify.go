package mochi

import (
	"sync"
	"sync/atomic"
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
