// SPDX-License-Identifier: MIT

//go:build linux

package mqtt

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
)

// poller waits for data on the sockets of parked clients: one goroutine
// and one epoll instance per server. Sockets are registered one-shot
// (EPOLLONESHOT): an event disarms the socket until the client parks
// again, so a client is woken once per park. Each registration carries a
// token of the poller's, not the file descriptor, whose number is reused
// once a connection closes. [iotq patch 18]
type poller struct {
	epfd   int
	pipe   [2]int // the goroutine's stop signal: pipe[0] registered with token 0
	resume func(*Client)
	log    *slog.Logger
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	clients map[uint64]*Client // by token
	next    uint64
}

// newPoller starts the poller goroutine; close stops it.
func newPoller(resume func(*Client), log *slog.Logger) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	p := &poller{epfd: epfd, resume: resume, log: log, done: make(chan struct{}), clients: map[uint64]*Client{}}
	if err := syscall.Pipe2(p.pipe[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		_ = syscall.Close(epfd)
		return nil, fmt.Errorf("pipe2: %w", err)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.pipe[0], &ev); err != nil {
		p.closeFDs()
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	go p.run()
	return p, nil
}

func (p *poller) closeFDs() {
	_ = syscall.Close(p.pipe[0])
	_ = syscall.Close(p.pipe[1])
	_ = syscall.Close(p.epfd)
}

// close stops the poller goroutine and waits for it. Parked clients are
// not woken: the server closes after its clients have ended.
func (p *poller) close() {
	p.once.Do(func() {
		_, _ = syscall.Write(p.pipe[1], []byte{0})
		<-p.done
		p.closeFDs()
	})
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]syscall.EpollEvent, 128)
	var wake []*Client
	for {
		n, err := syscall.EpollWait(p.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			p.log.Error("poller stopped: parked clients are no longer woken", "error", err)
			return
		}
		wake = wake[:0]
		p.mu.Lock()
		for _, ev := range events[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if tok == 0 {
				p.mu.Unlock()
				return // close
			}
			if cl, ok := p.clients[tok]; ok {
				wake = append(wake, cl)
			}
		}
		p.mu.Unlock()
		for i, cl := range wake {
			cl.wakeParked()
			wake[i] = nil
		}
	}
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
	var cerr error
	err := pk.rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(p.epfd, op, int(fd), &ev)
		if op == syscall.EPOLL_CTL_MOD && errors.Is(cerr, syscall.ENOENT) {
			cerr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
		}
	})
	if err != nil {
		return err
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
