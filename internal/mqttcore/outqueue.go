// SPDX-License-Identifier: MIT

package mqttcore

import (
	"sync"
	"sync/atomic"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// outQueue is a client's queue of outbound packets. [iotq patch 11]
//
// Upstream gave every client a channel of MaximumClientWritesPending slots,
// allocated up front, and a write goroutine for the client's whole life, so
// an idle client paid for both (about 4 KiB of channel with 512 slots and
// 8 to 16 KiB of goroutine stack). Here the ring buffer is allocated with
// the first packet, grows up to max, and is released when it drains (small
// ones are kept while the writer runs); the writer goroutine runs only
// while packets are queued: push reports when the caller must start it,
// and pop ends it by reporting an empty queue.
type outQueue struct {
	mu      sync.Mutex
	buf     []*packets.Packet // ring buffer; nil when empty
	head    int               // index of the oldest packet
	n       int               // packets queued
	max     int               // capacity limit
	writing bool              // a writer goroutine is draining the queue
	length  atomic.Int32      // n, readable without the lock
}

// outQueueKeep is the largest ring kept when the queue drains.
const outQueueKeep = 16

// push appends pk unless the queue holds max packets already. start is
// true when no writer runs: the caller must start one (it now counts as
// running).
func (q *outQueue) push(pk *packets.Packet) (ok, start bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.max {
		return false, false
	}
	if q.n == len(q.buf) {
		size := 2 * len(q.buf)
		if size < 8 {
			size = 8
		}
		if size > q.max {
			size = q.max
		}
		nb := make([]*packets.Packet, size)
		for i := 0; i < q.n; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = pk
	q.n++
	q.length.Store(int32(q.n))
	if !q.writing {
		q.writing = true
		start = true
	}
	return true, start
}

// idle reports whether the queue is empty and no writer runs: everything
// queued has been written. [iotq patch 32]
func (q *outQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n == 0 && !q.writing
}

// pop removes the oldest packet. When the queue is empty it reports false
// and the writer must end (it no longer counts as running).
func (q *outQueue) pop() (*packets.Packet, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		q.endLocked()
		return nil, false
	}
	return q.takeLocked(), true
}

// popHeld removes the oldest packet for a writer that keeps its role when
// the queue is empty (a reader writing deliveries, patch 40): it reports
// false then, and the writer ends its role with endHeld.
func (q *outQueue) popHeld() (*packets.Packet, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil, false
	}
	return q.takeLocked(), true
}

// hold takes the writer's role while no writer runs, before anything is
// queued to be written: pushes then queue behind what the holder writes
// itself and start no writer. It reports false if a writer runs already.
// The holder lets go with endHeld. [iotq patch 60]
func (q *outQueue) hold() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing {
		return false
	}
	q.writing = true
	return true
}

// endHeld ends the writer's role if the queue is empty and reports
// whether it did; false: packets came meanwhile, and the role goes on.
// [iotq patch 40]
func (q *outQueue) endHeld() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n != 0 {
		return false
	}
	q.endLocked()
	return true
}

// endLocked ends the writer's role on an empty queue.
func (q *outQueue) endLocked() {
	q.writing = false
	if len(q.buf) > outQueueKeep {
		q.buf, q.head = nil, 0
	}
}

// takeLocked removes the oldest of the queued packets.
func (q *outQueue) takeLocked() *packets.Packet {
	pk := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	q.length.Store(int32(q.n))
	return pk
}

// Len returns the number of queued packets.
func (q *outQueue) Len() int { return int(q.length.Load()) }
