// The run loop: one reader per TUN, one forwarding thread, and the
// departure heap between them.

package link

import (
	"container/heap"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// departure is an entry of the heap: a packet to write at at, or (buf
// nil) a service: at is when p's serializer is free for its next packet.
type departure struct {
	at  time.Duration
	seq uint64
	p   *path
	buf *[]byte
	n   int
}

type departures []departure

func (d departures) Len() int { return len(d) }

func (d departures) Less(i, j int) bool {
	if d[i].at != d[j].at {
		return d[i].at < d[j].at
	}
	return d[i].seq < d[j].seq
}

func (d departures) Swap(i, j int) { d[i], d[j] = d[j], d[i] }

func (d *departures) Push(x any) { *d = append(*d, x.(departure)) }

func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// run starts the forwarding thread and one reader per endpoint.
func (n *Network) run() {
	n.wg.Add(1)
	go n.forward()
	<-n.rtSet
	for _, e := range n.eps {
		n.wg.Add(1)
		go n.read(e)
	}
	n.rtMu.Lock()
	ok, rtErr := n.rtOK, n.rtErr
	n.rtMu.Unlock()
	if ok && n.opts.RealTimeProcess {
		n.wg.Add(1)
		go n.raiseThreads()
	}
	if ok {
		n.log.Info("link up", "id", n.id, "seed", n.seed, "realtime", "SCHED_FIFO")
	} else {
		n.log.Warn("forwarding thread runs without real-time priority; delays may be up to about 1 ms late under load (run as root without RT limits to get SCHED_FIFO)", "error", rtErr)
	}
}

// forward is the forwarding thread: it sleeps on the timerfd and writes
// every packet whose departure time has come.
func (n *Network) forward() {
	defer n.wg.Done()
	runtime.LockOSThread() // never unlocked: a real-time thread dies with its goroutine
	defer func() {
		// Should the runtime keep the thread anyway, it must not keep
		// our priority.
		_ = setThreadNormal(unix.Gettid())
	}()
	n.rtMu.Lock()
	n.rtTid = unix.Gettid()
	if n.opts.NoRealTime {
		n.rtErr = errors.New("disabled by Options.NoRealTime")
	} else if err := setRealTime(50); err != nil {
		n.rtErr = fmt.Errorf("sched_setattr SCHED_FIFO: %w", err)
	} else {
		n.rtOK = true
	}
	n.rtMu.Unlock()
	close(n.rtSet)
	batch := make([]departure, 0, 64)
	services := make([]departure, 0, 8)
	for {
		if err := n.tm.wait(); err != nil {
			n.log.Error("timerfd", "error", err)
			return
		}
		if n.closed.Load() {
			n.mu.Lock()
			for _, d := range n.deps {
				if d.buf != nil {
					n.bufs.Put(d.buf)
				}
			}
			n.deps = nil
			n.mu.Unlock()
			return
		}
		now := monoNow()
		batch, services = batch[:0], services[:0]
		n.mu.Lock()
		for len(n.deps) > 0 && n.deps[0].at <= now {
			d := heap.Pop(&n.deps).(departure)
			if d.buf == nil {
				services = append(services, d)
			} else {
				batch = append(batch, d)
			}
		}
		switch {
		case n.closed.Load():
			// teardown armed the timer under mu: leave it, so the next
			// wait returns at once.
		case len(n.deps) > 0:
			n.armed = n.deps[0].at
			n.tm.arm(n.armed)
		default:
			n.armed = 0
		}
		n.mu.Unlock()
		if len(batch) > 0 {
			n.lateMu.Lock()
			for _, d := range batch {
				n.late.record(now - d.at)
			}
			n.lateMu.Unlock()
		}
		// Served packets depart after their serialization: never in this
		// batch, so the order of the two loops does not matter.
		for _, d := range services {
			d.p.mu.Lock()
			if d.p.wakeAt == d.at {
				d.p.wakeAt = 0
			}
			n.schedule(d.p, d.p.serve(now))
			d.p.mu.Unlock()
		}
		for _, d := range batch {
			pkt := (*d.buf)[:d.n]
			if _, err := d.p.out.f.Write(pkt); err != nil {
				n.writeErrs.Add(1)
			}
			if w := d.p.out.pcap; w != nil {
				_ = w.WritePacket(time.Now(), pkt) // errors latch in the writer and surface on Close
			}
			n.bufs.Put(d.buf)
		}
	}
}

// read takes packets from one endpoint, asks the model, and queues them.
func (n *Network) read(e *endpoint) {
	defer n.wg.Done()
	for {
		bp := n.bufs.Get().(*[]byte)
		nr, err := e.f.Read(*bp)
		if err != nil {
			n.bufs.Put(bp)
			if !n.closed.Load() && !errors.Is(err, os.ErrClosed) {
				n.log.Error("tun read", "interface", e.ifname, "error", err)
			}
			return
		}
		now := monoNow()
		pkt := (*bp)[:nr]
		if nr < 20 || pkt[0]>>4 != 4 {
			n.ignored.Add(1) // not IPv4 (IPv6 is disabled in our namespaces)
			n.bufs.Put(bp)
			continue
		}
		if e.pcap != nil {
			_ = e.pcap.WritePacket(time.Now(), pkt)
		}
		p := e.route([4]byte(pkt[16:20]))
		if p == nil {
			n.ignored.Add(1)
			n.bufs.Put(bp)
			continue
		}
		if (p.natOut != nil || p.natIn != nil) && !p.translate(now, pkt) {
			p.mu.Lock()
			p.refuse(nr, CauseNAT)
			p.mu.Unlock()
			n.bufs.Put(bp)
			continue
		}
		p.mu.Lock()
		n.schedule(p, p.arrive(now, nr, bp))
		p.mu.Unlock()
	}
}

// translate passes pkt through the NATs of p, in the order the packet
// meets them: the sender's, then the receiver's. False means a NAT
// dropped it.
func (p *path) translate(now time.Duration, pkt []byte) bool {
	if p.natOut != nil && !p.natOut.outbound(now, pkt) {
		return false
	}
	return p.natIn == nil || p.natIn.inbound(now, pkt)
}

// schedule turns a model's events into heap entries: departures are
// queued, dropped packets' buffers return to the pool, and p gets a
// service entry when its serializer will next be free. p.mu must be held.
func (n *Network) schedule(p *path, evs []Event) {
	var wake time.Duration
	if p.wake != nil {
		if t, ok := p.wake(); ok && (p.wakeAt == 0 || t < p.wakeAt) {
			wake, p.wakeAt = t, t
		}
	}
	if len(evs) == 0 && wake == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range evs {
		bp := e.Ref.(*[]byte)
		if e.Drop != CauseNone {
			n.bufs.Put(bp)
			continue
		}
		n.pushLocked(departure{at: e.Depart, p: p, buf: bp, n: e.Size})
	}
	if wake != 0 {
		n.pushLocked(departure{at: wake, p: p})
	}
}

// pushLocked adds d to the heap and arms the timer if d is the earliest.
// n.mu must be held.
func (n *Network) pushLocked(d departure) {
	n.seq++
	d.seq = n.seq
	heap.Push(&n.deps, d)
	if n.armed == 0 || d.at < n.armed {
		n.armed = d.at
		n.tm.arm(d.at)
	}
}

// LinkStats are the counters of one direction of a link or medium.
type LinkStats struct {
	Link string `json:"link"`
	From string `json:"from"`
	To   string `json:"to"`
	DirStats
}

// Direction names the direction as "FROM->TO".
func (s LinkStats) Direction() string { return s.From + "->" + s.To }

// Stats returns the counters of every direction of every link and medium,
// in topology order.
func (n *Network) Stats() []LinkStats {
	out := make([]LinkStats, 0, len(n.paths))
	for _, p := range n.paths {
		p.mu.Lock()
		s := p.stats()
		p.mu.Unlock()
		out = append(out, LinkStats{Link: p.link, From: p.from, To: p.to, DirStats: s})
	}
	return out
}

// Lateness summarises how late the forwarding thread woke for each packet
// (time of the write minus the model's departure time). It is the
// emulator's own timing error; the time a packet waits to be read from its
// TUN device adds to it and is not included.
func (n *Network) Lateness() DelaySummary {
	n.lateMu.Lock()
	defer n.lateMu.Unlock()
	return n.late.summary()
}

// Ignored counts packets that were not forwarded because they were not
// IPv4 or had no destination on their medium.
func (n *Network) Ignored() uint64 { return n.ignored.Load() }
