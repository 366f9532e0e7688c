package link

import (
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
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	nats  []*nat             // rebinding NATs, for the schedule origin

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
//
// Lock order: path.mu before Network.mu.
type path struct {
	mu *sync.Mutex // shared by every path of one medium; guards the model and wakeAt
	// arrive, serve and wake are the model's (serve and wake are nil for
	// a medium: its departures are fixed on arrival). Their events are
	// valid until the next call.
	arrive func(now time.Duration, size int, ref any) []Event
	serve  func(now time.Duration) []Event
	wake   func() (time.Duration, bool)
	wakeAt time.Duration // the earliest service entry in the heap (0: none)
	stats  func() DirStats
	// natOut and natIn are the rebinding NATs this direction leaves
	// (sender behind it) and enters (receiver behind it); nil without.
	// refuse counts a packet a NAT dropped (links only).
	natOut, natIn *nat
	refuse        func(size int, c Cause)
	dir           *Dir // the model of a link's direction (Change); nil on a medium
	out           *endpoint
	link          string
	from, to      string
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
		log.Warn("removing stale namespaces", "error", err)
	} else if len(removed) > 0 {
		log.Info("removed stale namespaces of dead runs", "namespaces", removed)
	}
	// The token makes the names of this network's namespaces its own. It
	// was 2 bytes: with 100 cells at once in one process (lab --jobs) two
	// networks drew the same one now and then, and a namespace deleted on
	// one's retried teardown could be the other's, just created under the
	// same name ("ip link set ... netns NAME": argument is wrong).
	var tok [8]byte
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
	for _, t := range n.nats {
		t.start = n.start
	}
	n.run()
	return n, nil
}

// nsName is the namespace name of a node.
func (n *Network) nsName(node string) string { return n.id + "-" + node }

// Close stops forwarding, closes every TUN and deletes every namespace.
// Idempotent; safe to call from any goroutine.
func (n *Network) Close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() { n.closeErr = n.teardown() })
	return n.closeErr
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
			if d := e.pcap.Dropped(); d > 0 {
				errs = append(errs, fmt.Errorf("capture of %s: %d of %d packets left out: the disk did not keep up", e.ifname, d, d+e.pcap.Packets()))
			}
		}
	}
	for _, st := range n.order {
		if st.ns == "" {
			continue
		}
		if err := deleteNamespace(st.ns); err != nil {
			errs = append(errs, err)
		}
	}
	n.log.Info("link down", "id", n.id)
	return errors.Join(errs...)
}

// deleteNamespace deletes a namespace, each one with its own time limit:
// when many cells end at once, "ip netns del" waits for the kernel's
// network lock behind all the others, and a limit shared by all of a
// network's namespaces ran out (a cell failed on teardown after its
// measurement was complete). One retry after a pause, as the lock may
// have been held by a burst.
func deleteNamespace(ns string) error {
	var err error
	for attempt := range 2 {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out string
		out, err = ipCmd(ctx, "netns", "del", ns)
		cancel()
		if err == nil {
			return nil
		}
		if _, serr := os.Stat("/run/netns/" + ns); errors.Is(serr, os.ErrNotExist) {
			return nil // the first attempt deleted it after all
		}
		err = fmt.Errorf("delete namespace %s: %s: %w", ns, strings.TrimSpace(out), err)
	}
	return err
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

// mix derives independent per-direction seeds from the run seed (splitmix64).
func mix(s, k uint64) uint64 {
	z := s + (k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
