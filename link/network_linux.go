package link

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Network is a running topology: namespaces, TUN devices and the forwarder.
// Its methods are safe for concurrent use.
type Network struct {
	opts   Options
	log    *slog.Logger
	prefix string
	id     string // PREFIX<pid>-<token>
	seed   uint64

	nodes map[string]*nodeState
	order []*nodeState
	eps   []*endpoint
	paths []*path
	nets  map[string]*subnet // link or medium name -> subnet
	dirs  []*Dir             // link directions, for the schedule origin

	mu    sync.Mutex // guards deps, seq, armed
	deps  departures
	seq   uint64
	armed time.Duration

	tm       *timer
	bufSize  int
	bufs     sync.Pool
	closed   atomic.Bool
	once     sync.Once
	closeErr error
	wg       sync.WaitGroup
	start    time.Duration

	rtMu  sync.Mutex
	rtOK  bool
	rtErr error
	rtSet chan struct{}
	rtTid int           // the forwarding thread
	stop  chan struct{} // closed by teardown: stops helper goroutines

	writeErrs atomic.Uint64
	ignored   atomic.Uint64

	lateMu sync.Mutex // guards late
	late   *histogram // how late the forwarder wrote packets
}

type nodeState struct {
	name string
	ns   string // "" for the host namespace
	host bool
	eps  []*endpoint
}

type subnet struct {
	prefix netip.Prefix
	addrs  map[string]netip.Addr // node -> address
	ifs    map[string]string     // node -> interface name
}

type endpoint struct {
	node   *nodeState
	owner  string // link or medium name
	ifname string
	addr   netip.Addr
	f      *os.File
	pcap   *PcapWriter
	route  func(dst [4]byte) *path
}

// path is one direction: from an endpoint, through a model, to an endpoint.
type path struct {
	mu       *sync.Mutex // shared by every path of one medium
	arrive   func(now time.Duration, size int) Verdict
	stats    func() DirStats
	out      *endpoint
	link     string
	from, to string
}

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
func (d *departures) Push(x any)   { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// Preflight checks what Up needs (root, /dev/net/tun, the ip command) and
// returns an error that says what is missing and how to get it.
func Preflight() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: run as root, for example with sudo", ErrNotRoot)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: it is missing (load the tun module: modprobe tun)", ErrNoTUN)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: install it (apt-get install iproute2)", ErrNoIP)
	}
	return nil
}

// Up builds topo and starts forwarding. ctx bounds the setup only; the
// network runs until Close. On error nothing is left behind.
func Up(ctx context.Context, topo Topology, opts Options) (*Network, error) {
	if err := topo.Validate(); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !nameRE.MatchString(strings.TrimRight(opts.Prefix, "-_")) || len(opts.Prefix) > 12 {
		return nil, fmt.Errorf("prefix %q: use up to 12 letters, digits, '-' or '_'", opts.Prefix)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "link")
	if removed, err := Cleanup(ctx, opts.Prefix); err != nil {
		log.Warn("removing stale namespaces", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed stale namespaces of dead runs", "namespaces", removed)
	}
	var tok [2]byte
	_, _ = rand.Read(tok[:]) // crypto/rand never fails on Linux
	seed := opts.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	n := &Network{
		opts:   opts,
		log:    log,
		prefix: opts.Prefix,
		id:     fmt.Sprintf("%s%d-%s", opts.Prefix, os.Getpid(), hex.EncodeToString(tok[:])),
		seed:   seed,
		nodes:  map[string]*nodeState{},
		nets:   map[string]*subnet{},
		rtSet:  make(chan struct{}),
		stop:   make(chan struct{}),
		late:   newHistogram(),
	}
	if err := n.build(ctx, topo); err != nil {
		n.teardown()
		return nil, err
	}
	// Schedules count from now: the network is complete. No packet has
	// reached a model yet (readers start in run).
	n.start = monoNow()
	for _, d := range n.dirs {
		d.start = n.start
	}
	n.run()
	return n, nil
}

// nsName is the namespace name of a node.
func (n *Network) nsName(node string) string { return n.id + "-" + node }

func (n *Network) build(ctx context.Context, topo Topology) error {
	for _, nd := range topo.Nodes {
		st := &nodeState{name: nd.Name, host: nd.Host}
		if !nd.Host {
			st.ns = n.nsName(nd.Name)
		}
		n.nodes[nd.Name] = st
		n.order = append(n.order, st)
	}
	// Namespaces first, so that a failure here leaves little to undo.
	for _, st := range n.order {
		if st.host {
			continue
		}
		if out, err := ipCmd(ctx, "netns", "add", st.ns); err != nil {
			if strings.Contains(out, "exists") {
				st.ns = "" // not ours: do not delete it
				return fmt.Errorf("node %q: namespace %q: %w", st.name, n.nsName(st.name), ErrNameInUse)
			}
			st.ns = "" // creation failed
			return fmt.Errorf("node %q: ip netns add: %s: %w", st.name, out, err)
		}
		script := "ip link set lo up && echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"
		if out, err := nsExec(ctx, st.ns, "sh", "-c", script); err != nil {
			return fmt.Errorf("node %q: namespace setup: %s: %w", st.name, out, err)
		}
	}
	ccOf := map[string]string{}
	for _, nd := range topo.Nodes {
		cc := nd.CongestionControl
		if cc == "" && !nd.Host {
			cc = n.opts.CongestionControl
		}
		if cc != "" {
			ccOf[nd.Name] = cc
		}
	}

	var hostLock *os.File
	defer func() {
		if hostLock != nil {
			hostLock.Close()
		}
	}()
	maxMTU := DefaultMTU
	start := monoNow()
	n.start = start
	for k, l := range topo.Links {
		mtu := max(l.AtoB.mtu(), l.BtoA.mtu())
		maxMTU = max(maxMTU, mtu)
		var pfx netip.Prefix
		if n.nodes[l.A].host || n.nodes[l.B].host {
			if hostLock == nil {
				var err error
				if hostLock, err = lockHostSubnets(); err != nil {
					return err
				}
			}
			var err error
			if pfx, err = freeHostSubnet(); err != nil {
				return err
			}
		} else {
			pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(k + 1), 0}), 24)
		}
		sn := &subnet{prefix: pfx, addrs: map[string]netip.Addr{}, ifs: map[string]string{}}
		n.nets[l.Name] = sn
		a, err := n.addEndpoint(ctx, l.Name, n.nodes[l.A], hostAddr(pfx, 1), mtu)
		if err != nil {
			return err
		}
		b, err := n.addEndpoint(ctx, l.Name, n.nodes[l.B], hostAddr(pfx, 2), mtu)
		if err != nil {
			return err
		}
		rtt := l.AtoB.Delay + l.BtoA.Delay
		dab := NewDir(l.AtoB, rtt, start, mix(n.seed, uint64(2*k)))
		dba := NewDir(l.BtoA, rtt, start, mix(n.seed, uint64(2*k+1)))
		n.dirs = append(n.dirs, dab, dba)
		pab := &path{mu: new(sync.Mutex), arrive: dab.Arrive, stats: dab.Stats, out: b, link: l.Name, from: l.A, to: l.B}
		pba := &path{mu: new(sync.Mutex), arrive: dba.Arrive, stats: dba.Stats, out: a, link: l.Name, from: l.B, to: l.A}
		a.route = func([4]byte) *path { return pab }
		b.route = func([4]byte) *path { return pba }
		n.paths = append(n.paths, pab, pba)
		for _, e := range []*endpoint{a, b} {
			sn.addrs[e.node.name] = e.addr
			sn.ifs[e.node.name] = e.ifname
		}
	}
	for k, m := range topo.Media {
		mtu := m.MTU
		if mtu == 0 {
			mtu = DefaultMTU
		}
		maxMTU = max(maxMTU, mtu)
		members := append([]string{m.Hub}, m.Stations...)
		var pfx netip.Prefix
		host := false
		for _, name := range members {
			host = host || n.nodes[name].host
		}
		if host {
			if hostLock == nil {
				var err error
				if hostLock, err = lockHostSubnets(); err != nil {
					return err
				}
			}
			var err error
			if pfx, err = freeHostSubnet(); err != nil {
				return err
			}
		} else {
			pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 78, byte(k + 1), 0}), 24)
		}
		sn := &subnet{prefix: pfx, addrs: map[string]netip.Addr{}, ifs: map[string]string{}}
		n.nets[m.Name] = sn
		eps := make([]*endpoint, len(members))
		byAddr := map[[4]byte]int{}
		for i, name := range members {
			e, err := n.addEndpoint(ctx, m.Name, n.nodes[name], hostAddr(pfx, i+1), mtu)
			if err != nil {
				return err
			}
			eps[i] = e
			byAddr[e.addr.As4()] = i
			sn.addrs[name] = e.addr
			sn.ifs[name] = e.ifname
		}
		model := NewMediumModel(m.MediumParams, len(members), mix(n.seed, uint64(1000+k)))
		mu := new(sync.Mutex)
		for i := range members {
			table := make([]*path, len(members))
			for j := range members {
				if i == j {
					continue
				}
				i, j := i, j
				p := &path{mu: mu,
					arrive: func(now time.Duration, size int) Verdict { return model.Arrive(now, i, j, size) },
					stats:  func() DirStats { return model.Stats(i, j) },
					out:    eps[j], link: m.Name, from: members[i], to: members[j]}
				table[j] = p
				n.paths = append(n.paths, p)
			}
			eps[i].route = func(dst [4]byte) *path {
				j, ok := byAddr[dst]
				if !ok {
					return nil
				}
				return table[j]
			}
		}
	}
	// A namespace with exactly one interface gets a default route through
	// it, so it reaches everything on the far side (the shell's host).
	for _, st := range n.order {
		if st.host || len(st.eps) != 1 {
			continue
		}
		if out, err := ipCmd(ctx, "-n", st.ns, "route", "add", "default", "dev", st.eps[0].ifname); err != nil {
			return fmt.Errorf("node %q: default route: %s: %w", st.name, out, err)
		}
	}
	for name, cc := range ccOf {
		if err := n.SetCongestionControl(name, cc); err != nil {
			return err
		}
	}
	if n.opts.CaptureDir != "" {
		if err := os.MkdirAll(n.opts.CaptureDir, 0o755); err != nil {
			return fmt.Errorf("capture dir: %w", err)
		}
		for _, e := range n.eps {
			w, err := CreatePcap(filepath.Join(n.opts.CaptureDir, e.owner+"-"+e.node.name+".pcap"))
			if err != nil {
				return err
			}
			e.pcap = w
		}
	}
	n.bufSize = maxMTU + 64
	n.bufs.New = func() any { b := make([]byte, n.bufSize); return &b }
	tm, err := newTimer()
	if err != nil {
		return err
	}
	n.tm = tm
	return nil
}

func hostAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Addr().As4()
	a[3] = byte(i)
	return netip.AddrFrom4(a)
}

// addEndpoint creates a TUN, moves it into the node's namespace and
// configures address, MTU and state.
func (n *Network) addEndpoint(ctx context.Context, owner string, st *nodeState, addr netip.Addr, mtu int) (*endpoint, error) {
	pattern := strings.TrimRight(n.prefix, "-_")
	if len(pattern) > 10 {
		pattern = pattern[:10]
	}
	f, ifname, err := openTUN(pattern + "%d")
	if err != nil {
		return nil, fmt.Errorf("%s end %q: %w", owner, st.name, err)
	}
	e := &endpoint{node: st, owner: owner, ifname: ifname, addr: addr, f: f}
	n.eps = append(n.eps, e)
	st.eps = append(st.eps, e)
	cidr := netip.PrefixFrom(addr, 24).String()
	mtuS := strconv.Itoa(mtu)
	// A long TUN queue, so bursts wait for our reader instead of being
	// dropped by the kernel where no counter of ours sees them.
	const txqlen = "10000"
	fail := func(what, out string, err error) error {
		return fmt.Errorf("%s end %q: %s: %s: %w", owner, st.name, what, strings.TrimSpace(out), err)
	}
	if st.host {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0o644) // best effort: IPv6 packets are ignored anyway
		if out, err := ipCmd(ctx, "addr", "add", cidr, "dev", ifname); err != nil {
			return nil, fail("address", out, err)
		}
		if out, err := ipCmd(ctx, "link", "set", "dev", ifname, "mtu", mtuS, "txqueuelen", txqlen, "up"); err != nil {
			return nil, fail("link up", out, err)
		}
		return e, nil
	}
	// Inside the node the interface is named after its link (TUN names in
	// the host namespace are reused, so two ends would clash otherwise).
	inner := owner
	if len(inner) > 15 {
		inner = fmt.Sprintf("iotq%d", len(st.eps)-1)
	}
	if out, err := ipCmd(ctx, "link", "set", "dev", ifname, "netns", st.ns, "name", inner); err != nil {
		return nil, fail("move into namespace", out, err)
	}
	ifname = inner
	e.ifname = inner
	if out, err := ipCmd(ctx, "-n", st.ns, "addr", "add", cidr, "dev", ifname); err != nil {
		return nil, fail("address", out, err)
	}
	if out, err := ipCmd(ctx, "-n", st.ns, "link", "set", "dev", ifname, "mtu", mtuS, "txqueuelen", txqlen, "up"); err != nil {
		return nil, fail("link up", out, err)
	}
	return e, nil
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
		n.log.Warn("forwarding thread runs without real-time priority; delays may be up to about 1 ms late under load (run as root without RT limits to get SCHED_FIFO)", "err", rtErr)
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
	for {
		if err := n.tm.wait(); err != nil {
			n.log.Error("timerfd", "err", err)
			return
		}
		if n.closed.Load() {
			n.mu.Lock()
			for _, d := range n.deps {
				n.bufs.Put(d.buf)
			}
			n.deps = nil
			n.mu.Unlock()
			return
		}
		now := monoNow()
		batch = batch[:0]
		n.mu.Lock()
		for len(n.deps) > 0 && n.deps[0].at <= now {
			batch = append(batch, heap.Pop(&n.deps).(departure))
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
				n.log.Error("tun read", "interface", e.ifname, "err", err)
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
		p.mu.Lock()
		v := p.arrive(now, nr)
		p.mu.Unlock()
		if v.Drop != CauseNone {
			n.bufs.Put(bp)
			continue
		}
		n.mu.Lock()
		n.seq++
		heap.Push(&n.deps, departure{at: v.Depart, seq: n.seq, p: p, buf: bp, n: nr})
		if n.armed == 0 || v.Depart < n.armed {
			n.armed = v.Depart
			n.tm.arm(v.Depart)
		}
		n.mu.Unlock()
	}
}

// Close stops forwarding, closes every TUN and deletes every namespace.
// Idempotent; safe to call from any goroutine.
func (n *Network) Close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() { n.closeErr = n.teardown() })
	return n.closeErr
}

// raiseThreads keeps every thread of the process at SCHED_FIFO 40 until
// the network closes, then returns the threads it raised to normal.
func (n *Network) raiseThreads() {
	defer n.wg.Done()
	raised := map[int]bool{}
	n.rtMu.Lock()
	fwd := n.rtTid
	n.rtMu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, tid := range threadIDs() {
			if tid == fwd || raised[tid] {
				continue
			}
			if pol, err := threadPolicy(tid); err != nil || pol != unix.SCHED_NORMAL {
				continue
			}
			if err := setThreadRealTime(tid, 40); err == nil {
				raised[tid] = true
			}
		}
		select {
		case <-n.stop:
			for tid := range raised {
				_ = setThreadNormal(tid) // the thread may be gone
			}
			return
		case <-tick.C:
		}
	}
}

func (n *Network) teardown() error {
	n.closed.Store(true)
	if n.stop != nil {
		close(n.stop)
	}
	var errs []error
	for _, e := range n.eps {
		if err := e.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", e.ifname, err))
		}
	}
	if n.tm != nil {
		n.mu.Lock()
		n.armed = 1 // readers will not re-arm a later time
		n.tm.arm(1) // wake the forwarding thread
		n.mu.Unlock()
	}
	n.wg.Wait()
	if n.tm != nil {
		n.tm.close()
	}
	for _, e := range n.eps {
		if e.pcap != nil {
			if err := e.pcap.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, st := range n.order {
		if st.ns == "" {
			continue
		}
		if out, err := ipCmd(ctx, "netns", "del", st.ns); err != nil {
			errs = append(errs, fmt.Errorf("delete namespace %s: %s: %w", st.ns, strings.TrimSpace(out), err))
		}
	}
	n.log.Info("link down", "id", n.id)
	return errors.Join(errs...)
}

func (n *Network) node(name string) (*nodeState, error) {
	st, ok := n.nodes[name]
	if !ok {
		return nil, fmt.Errorf("node %q: %w", name, ErrUnknownNode)
	}
	return st, nil
}

// Command returns a command that runs name inside node's namespace (through
// "ip netns exec", which keeps name's exit code). For the host node it runs
// directly; for an unknown node Start fails with ErrUnknownNode.
func (n *Network) Command(ctx context.Context, node, name string, args ...string) *exec.Cmd {
	st, ok := n.nodes[node]
	if !ok {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Err = fmt.Errorf("node %q: %w", node, ErrUnknownNode) // Start returns it
		return cmd
	}
	if st.host {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", st.ns, name}, args...)...)
}

// Namespace returns the network namespace name of node ("" for the host
// node or an unknown node).
func (n *Network) Namespace(node string) string {
	if st, ok := n.nodes[node]; ok {
		return st.ns
	}
	return ""
}

// Addr returns the address of node on its first link or medium (in
// topology order: links first, then media). Use AddrOn for nodes with more
// than one. The zero Addr when the node has none.
func (n *Network) Addr(node string) netip.Addr {
	st, ok := n.nodes[node]
	if !ok || len(st.eps) == 0 {
		return netip.Addr{}
	}
	return st.eps[0].addr
}

// AddrOn returns the address of node on the named link or medium: the
// address peers on that link use to reach it.
func (n *Network) AddrOn(node, link string) netip.Addr {
	if sn, ok := n.nets[link]; ok {
		return sn.addrs[node]
	}
	return netip.Addr{}
}

// Interface returns the interface name of node on link ("" if none).
func (n *Network) Interface(node, link string) string {
	if sn, ok := n.nets[link]; ok {
		return sn.ifs[node]
	}
	return ""
}

// Subnet returns the /24 of a link or medium.
func (n *Network) Subnet(link string) netip.Prefix {
	if sn, ok := n.nets[link]; ok {
		return sn.prefix
	}
	return netip.Prefix{}
}

// Seed returns the seed of the random decisions.
func (n *Network) Seed() uint64 { return n.seed }

// RealTime reports whether the forwarding thread got SCHED_FIFO, and why not.
func (n *Network) RealTime() (bool, error) {
	n.rtMu.Lock()
	defer n.rtMu.Unlock()
	return n.rtOK, n.rtErr
}

// SetCongestionControl sets net.ipv4.tcp_congestion_control in node's
// namespace (for example "cubic"). The host node is refused: changing it
// would change the whole machine.
func (n *Network) SetCongestionControl(node, cc string) error {
	st, err := n.node(node)
	if err != nil {
		return err
	}
	if st.host {
		return fmt.Errorf("node %q is the host namespace: set its congestion control with sysctl yourself", node)
	}
	if !ccRE.MatchString(cc) {
		return fmt.Errorf("congestion control %q: use a name such as cubic, bbr or reno", cc)
	}
	const knob = "/proc/sys/net/ipv4/tcp_congestion_control"
	write := func() error {
		return doInNamespace(st.ns, func() error { return os.WriteFile(knob, []byte(cc), 0o644) })
	}
	err = write()
	if errors.Is(err, os.ErrPermission) {
		// Outside the host namespace only the algorithms listed in
		// net.ipv4.tcp_allowed_congestion_control may be chosen.
		if aerr := allowCongestionControl(cc); aerr == nil {
			n.log.Info("added to net.ipv4.tcp_allowed_congestion_control so namespaces may use it", "cc", cc)
			err = write()
		}
	}
	if err != nil {
		avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return fmt.Errorf("node %q: congestion control %q cannot be set (available: %s): %w",
			node, cc, strings.TrimSpace(string(avail)), err)
	}
	return nil
}

// allowCongestionControl adds cc to the host's
// net.ipv4.tcp_allowed_congestion_control (it must be available).
func allowCongestionControl(cc string) error {
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(avail)), cc) {
		return fmt.Errorf("%q is not available", cc)
	}
	cur, err := os.ReadFile(allowed)
	if err != nil {
		return err
	}
	list := strings.Fields(string(cur))
	if slices.Contains(list, cc) {
		return nil
	}
	return os.WriteFile(allowed, []byte(strings.Join(append(list, cc), " ")), 0o644)
}

// CongestionControl reads net.ipv4.tcp_congestion_control of node.
func (n *Network) CongestionControl(node string) (string, error) {
	st, err := n.node(node)
	if err != nil {
		return "", err
	}
	if st.host {
		b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		return strings.TrimSpace(string(b)), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := nsExec(ctx, st.ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		return "", fmt.Errorf("node %q: read congestion control: %s: %w", node, out, err)
	}
	return strings.TrimSpace(out), nil
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

func ipCmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return strings.TrimSpace(buf.String()), err
}

func nsExec(ctx context.Context, ns string, name string, args ...string) (string, error) {
	return ipCmd(ctx, append([]string{"netns", "exec", ns, name}, args...)...)
}

// Namespaces lists the namespaces whose names start with prefix.
func Namespaces(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// OwnerPID returns the pid encoded in a namespace name made by Up with
// prefix, or 0.
func OwnerPID(prefix, ns string) int {
	rest, ok := strings.CutPrefix(ns, prefix)
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Cleanup deletes the namespaces with prefix whose owning process is gone
// (left behind by a crash) and returns their names. Namespaces of live
// processes are left alone.
func Cleanup(ctx context.Context, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	names, err := Namespaces(prefix)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, ns := range names {
		pid := OwnerPID(prefix, ns)
		if pid != 0 && pidAlive(pid) && !pidReused(pid, "/run/netns/"+ns) {
			continue
		}
		if out, err := ipCmd(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %s: %w", ns, out, err))
			continue
		}
		removed = append(removed, ns)
	}
	return removed, errors.Join(errs...)
}

// lockHostSubnets serializes the choice of host-side subnets between
// processes (flock on a file in /run).
func lockHostSubnets() (*os.File, error) {
	f, err := os.OpenFile("/run/iotq-link.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("host subnet lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("host subnet lock: %w", err)
	}
	return f, nil
}

// freeHostSubnet picks a 10.79.X.0/24 that no interface of the host
// namespace uses. The caller holds the host subnet lock until the address
// is assigned.
func freeHostSubnet() (netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list host addresses: %s: %w", out, err)
	}
	used := string(out)
	for x := 1; x < 255; x++ {
		if !strings.Contains(used, fmt.Sprintf(" 10.79.%d.", x)) {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 79, byte(x), 0}), 24), nil
		}
	}
	return netip.Prefix{}, errors.New("no free host subnet in 10.79.0.0/16: remove stale interfaces with 'iotq link down'")
}

var ccRE = regexp.MustCompile(`^[a-z0-9_]{1,16}$`)

// mix derives independent per-direction seeds from the run seed (splitmix64).
func mix(s, k uint64) uint64 {
	z := s + (k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Do runs fn on an OS thread that has entered node's network namespace, so
// the sockets fn creates (net.ListenPacket, net.Dial...) live there and
// keep working after Do returns. fn must not start goroutines that expect
// to be in the namespace. For the host node fn runs directly.
func (n *Network) Do(node string, fn func() error) error {
	st, err := n.node(node)
	if err != nil {
		return err
	}
	if st.host {
		return fn()
	}
	return doInNamespace(st.ns, fn)
}

func doInNamespace(ns string, fn func() error) error {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer unix.Close(target)
	orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open own namespace: %w", err)
	}
	defer unix.Close(orig)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine
			// instead of serving others from the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
