package transport

import (
	"sync"
	"time"
)

// readDeadline is the read deadline of a conn whose Read waits on channels
// (the multi-stream QUIC conns, server and client side): get returns the
// deadline and a channel closed when it changes, so a waiting Read can
// start over with the new one. The zero value is ready to use.
type readDeadline struct {
	mu      sync.Mutex
	t       time.Time
	changed chan struct{}
}

func (d *readDeadline) get() (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return d.t, d.changed
}

func (d *readDeadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t = t
	if d.changed != nil {
		close(d.changed)
	}
	d.changed = make(chan struct{})
}
