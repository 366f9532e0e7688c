// SPDX-License-Identifier: MIT

package mqttcore

import "sync"

// sessionLocks serialises the connects of one client id. [iotq patch 17]
//
// Upstream ran the connects of one client id side by side: a connection
// could answer CONNACK, be closed by its client and be followed by the next
// connection of the same id before it became the delivery target
// (Clients.Add). The next connection then took over the connection before
// it, both moved that one's in-flight messages, and the earlier of the two
// became the delivery target after the later one: deliveries reached a
// closed connection that no later connection took over, and were lost
// (issue 11: 11 messages in a row at load ~500).
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

// sessionLock is the lock of one client id and the number of its holders
// and waiters.
type sessionLock struct {
	mu sync.Mutex
	n  int
}

// lock takes the lock of id, waiting while another connect of id holds it,
// and returns the function that releases it.
func (l *sessionLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sessionLock{}
	}
	sl := l.m[id]
	if sl == nil {
		sl = new(sessionLock)
		l.m[id] = sl
	}
	sl.n++
	l.mu.Unlock()
	sl.mu.Lock()
	return func() {
		sl.mu.Unlock()
		l.mu.Lock()
		sl.n--
		if sl.n == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}
