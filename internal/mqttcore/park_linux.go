// SPDX-License-Identifier: MIT

//go:build linux

package mqttcore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// poller waits for data on the sockets of parked clients: one goroutine
// and one epoll instance per server. Sockets are registered one-shot
// (EPOLLONESHOT): an event disarms the socket until the client parks
// again, so a client is woken once per park. Each registration carries a
// token of the poller's, not the file descriptor, whose number is reused
// once a connection closes. [iotq patch 18]
//
// The epoll descriptor is itself non-blocking and waits in the Go
// runtime's network poller (an epoll descriptor is readable while it has
// events), so the poller goroutine never blocks in epoll_wait. A first
// version did: the goroutine it started for a woken client then sat in
// the run queue of the P that the blocking system call held until the
// runtime's monitor took the P back, up to 10 ms on a loaded host, long
// enough for another connection's PUBLISH to overtake an UNSUBSCRIBE sent
// before it. Measured with four busy loops on two cores, Paho's
// test_unsubscribe: 9 of 26 runs failed before, 0 of 32 after.
type poller struct {
	ep     *os.File // the epoll descriptor, in the runtime's poller
	raw    syscall.RawConn
	resume func(*Client)
	log    *slog.Logger
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool // set before ep is closed: the wait's error is expected

	mu      sync.Mutex
	clients map[uint64]*Client // by token
	next    uint64
	waking  map[*clientPark]chan struct{} // woken, input not yet handled [iotq patch 39]

	// pass is held from taking events out of epoll until their clients
	// are woken, by run and by settle. [iotq patch 39]
	pass sync.Mutex
}

// newPoller starts the poller goroutine; close stops it.
func newPoller(resume func(*Client), log *slog.Logger) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		_ = syscall.Close(epfd)
		return nil, fmt.Errorf("epoll descriptor non-blocking: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "epoll") // non-blocking: os registers it with the runtime's poller
	raw, err := ep.SyscallConn()
	if err != nil {
		_ = ep.Close()
		return nil, fmt.Errorf("epoll descriptor: %w", err)
	}
	p := &poller{ep: ep, raw: raw, resume: resume, log: log, done: make(chan struct{}), clients: map[uint64]*Client{}, waking: map[*clientPark]chan struct{}{}}
	go p.run()
	return p, nil
}

// close stops the poller goroutine and waits for it. Parked clients are
// not woken: the server closes after its clients have ended.
func (p *poller) close() {
	p.once.Do(func() {
		p.closed.Store(true)
		_ = p.ep.Close() // the goroutine's wait ends with an error
		<-p.done
	})
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 128)
	var wake []*Client
	for {
		var n int
		var werr error
		locked := false
		err := p.raw.Read(func(fd uintptr) bool {
			p.pass.Lock() // a settle sees these events woken [iotq patch 39]
			for {
				n, werr = syscall.EpollWait(int(fd), events, 0)
				if !errors.Is(werr, syscall.EINTR) {
					break
				}
			}
			if werr != nil || n > 0 {
				locked = true
				return true
			}
			p.pass.Unlock()
			return false // nothing ready: wait in the runtime's poller
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			if locked {
				p.pass.Unlock()
			}
			if !p.closed.Load() {
				p.log.Error("poller stopped: parked clients are no longer woken", "error", err)
			}
			return
		}
		wake = p.wakeEvents(events[:n], wake)
		p.pass.Unlock()
	}
}

// wakeEvents wakes the clients of events; wake is scratch space, returned
// for reuse.
func (p *poller) wakeEvents(events []syscall.EpollEvent, wake []*Client) []*Client {
	wake = wake[:0]
	p.mu.Lock()
	for _, ev := range events {
		tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
		if cl, ok := p.clients[tok]; ok {
			wake = append(wake, cl)
		}
	}
	p.mu.Unlock()
	for i, cl := range wake {
		cl.wakeParked()
		wake[i] = nil
	}
	return wake
}

// arm registers (or re-arms) cl's socket for one wake on readable data,
// peer close or error. Called by the goroutine that owns cl. An error
// means the connection is closed.
func (p *poller) arm(cl *Client) error {
	pk := cl.park
	op := syscall.EPOLL_CTL_MOD
	if pk.token == 0 {
		p.mu.Lock()
		p.next++
		pk.token = p.next
		p.clients[pk.token] = cl
		p.mu.Unlock()
		op = syscall.EPOLL_CTL_ADD
	}
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
		Fd:     int32(uint32(pk.token)),
		Pad:    int32(uint32(pk.token >> 32)),
	}
	var cerr, perr error
	err := pk.rc.Control(func(fd uintptr) {
		perr = p.raw.Control(func(epfd uintptr) {
			cerr = syscall.EpollCtl(int(epfd), op, int(fd), &ev)
			if op == syscall.EPOLL_CTL_MOD && errors.Is(cerr, syscall.ENOENT) {
				cerr = syscall.EpollCtl(int(epfd), syscall.EPOLL_CTL_ADD, int(fd), &ev)
			}
		})
	})
	if err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("poller: %w", perr)
	}
	if cerr != nil {
		return fmt.Errorf("epoll_ctl: %w", cerr)
	}
	return nil
}

// forget drops cl's token; events still queued for it are ignored. The
// socket leaves the epoll set when it is closed.
func (p *poller) forget(pk *clientPark) {
	if pk.token == 0 {
		return
	}
	p.mu.Lock()
	delete(p.clients, pk.token)
	p.mu.Unlock()
	pk.token = 0
}

// Causal order across connections. [iotq patch 39]
//
// A parked client's input is handled by a goroutine started for it when
// the poller sees the data (run, then wakeParked). Under CPU load that
// goroutine can wait in a run queue for several milliseconds, long enough
// for a client that connects after the data was sent, and publishes at
// once, to be served first: Paho's test_unsubscribe sends UNSUBSCRIBE
// without waiting for UNSUBACK, connects a second client and publishes to
// the topic, and a message sent after the UNSUBSCRIBE was delivered (one
// clean-clone CI run in about twenty, with two busy loops beside it). A
// blocked read has the same race in principle, but both goroutines are
// made runnable by one pass of the runtime's poller, so its window is
// microseconds, not a scheduling quantum.
//
// Every new connection therefore settles the parked clients before its
// CONNECT is answered: input that has reached a parked client's socket
// (epoll_wait with no timeout) and input whose wake is already under way
// is handled first, up to settleMax. Whatever a client sent before another
// client connected is then handled before anything the new client sends,
// as on a broker with one event loop.

// woke records that pk was woken from parked; handled ends the record.
func (p *poller) woke(pk *clientPark) {
	p.mu.Lock()
	if _, ok := p.waking[pk]; !ok {
		p.waking[pk] = make(chan struct{})
	}
	pk.waking.Store(true)
	p.mu.Unlock()
}

func (p *poller) handled(pk *clientPark) {
	p.mu.Lock()
	if ch, ok := p.waking[pk]; ok {
		close(ch)
		delete(p.waking, pk)
	}
	pk.waking.Store(false)
	p.mu.Unlock()
}

// settle wakes the parked clients whose sockets have input now and waits,
// up to max, until every client woken so far has handled the input that
// woke it. It reports whether all did in time.
func (p *poller) settle(max time.Duration) bool {
	var events [64]syscall.EpollEvent
	p.pass.Lock() // events the run goroutine took are woken by now
	for {
		var n int
		var werr error
		err := p.raw.Control(func(epfd uintptr) {
			for {
				n, werr = syscall.EpollWait(int(epfd), events[:], 0)
				if !errors.Is(werr, syscall.EINTR) {
					return
				}
			}
		})
		if err != nil || werr != nil || n == 0 {
			break // closed (the run goroutine reports it) or nothing ready
		}
		p.wakeEvents(events[:n], nil)
		if n < len(events) {
			break
		}
	}
	p.pass.Unlock()
	p.mu.Lock()
	if len(p.waking) == 0 {
		p.mu.Unlock()
		return true
	}
	waits := make([]chan struct{}, 0, len(p.waking))
	for _, ch := range p.waking {
		waits = append(waits, ch)
	}
	p.mu.Unlock()
	timer := time.NewTimer(max)
	defer timer.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
	return true
}
