package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/link/trace"
)

// LinkFabric builds cells' networks with package link: one network
// namespace per node, emulated links between them, TCP congestion control
// pinned per namespace. Needs root (see link.Preflight). Safe for
// concurrent use.
type LinkFabric struct {
	// Prefix of the namespaces; empty means "iotqlab-".
	Prefix string
	// Logger; nil discards.
	Logger *slog.Logger
	// Timing, when set, receives the emulator's timing error (forwarder
	// lateness) of every network when it is closed.
	Timing *TimingGuard
}

// Name returns "link".
func (LinkFabric) Name() string { return "link" }

// Preflight reports what the fabric lacks (root, TUN, ip) and how to fix it.
func (LinkFabric) Preflight() error { return link.Preflight() }

func toParams(l LinkParams) (link.Params, error) {
	p := link.Params{Delay: time.Duration(l.DelayNs), Loss: l.LossPct / 100, Rate: l.RateBps, QueueBytes: l.QueueBytes}
	if l.BurstLen > 0 {
		ge, err := link.GEBursts(l.LossPct/100, l.BurstLen)
		if err != nil {
			return p, fmt.Errorf("link %s: bursty loss: %w", l.Name, err)
		}
		p.GilbertElliott = &ge
	}
	if l.Trace != "" {
		tr, err := trace.Resolve(l.Trace)
		if err != nil {
			return p, fmt.Errorf("link %s: %w", l.Name, err)
		}
		p.Trace, p.Rate = tr, 0
	}
	return p, nil
}

// toLink turns a lab link into an emulator link. A is the edge node, B the
// broker, so the edge node's egress is the emulator's "up" (A to B).
func toLink(l TopoLink) (link.Link, error) {
	p, err := toParams(l.Params)
	out := link.Link{Name: l.Name, A: l.A, B: l.B, AtoB: p, BtoA: p, Direction: link.DirectionBoth}
	switch l.Params.Direction {
	case DirectionEgress:
		out.Direction = link.DirectionUp
	case DirectionIngress:
		out.Direction = link.DirectionDown
	}
	return out, err
}

// Up builds t. A pcap of the publisher's link end is written to
// t.PcapFile when the network is closed.
func (f LinkFabric) Up(ctx context.Context, t Topology) (Network, error) {
	prefix := f.Prefix
	if prefix == "" {
		prefix = "iotqlab-"
	}
	topo := link.Topology{}
	for _, n := range t.Nodes {
		topo.Nodes = append(topo.Nodes, link.Node{Name: n, CongestionControl: t.TCPCongestion})
	}
	for _, l := range t.Links {
		ln, err := toLink(l)
		if err != nil {
			return nil, err
		}
		if t.PubNAT && l.A == NodePub {
			ln.AtoB.NAT = true // the publisher behind it; rebound by ChangePath
		}
		topo.Links = append(topo.Links, ln)
	}
	pubLink := "pub"
	if m := t.Medium; m != nil {
		topo.Media = append(topo.Media, link.Medium{Name: m.Name, Hub: m.Hub, Stations: m.Members, MediumParams: link.MediumParams{
			Capacity: m.Params.RateBps, FrameErrorRate: m.Params.LossPct / 100, Retries: m.Retries,
			Delay: time.Duration(m.Params.DelayNs), QueueBytes: m.Params.QueueBytes}})
		pubLink = m.Name
	}
	opts := link.Options{Prefix: prefix, Logger: f.Logger, Seed: uint64(t.Seed) | 1, CongestionControl: t.TCPCongestion}
	capDir := ""
	if t.PcapFile != "" {
		capDir = filepath.Join(filepath.Dir(t.PcapFile), "pcap")
		if err := os.MkdirAll(capDir, 0o755); err != nil {
			return nil, fmt.Errorf("capture directory: %w", err)
		}
		opts.CaptureDir = capDir
	}
	// Each Up names its namespaces with a fresh random 8-byte token; should
	// two cells at once (--jobs) ever draw the same one: draw again.
	var n *link.Network
	var err error
	for try := 0; try < 5; try++ {
		if n, err = link.Up(ctx, topo, opts); !errors.Is(err, link.ErrNameInUse) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ln := &linkNet{n: n, pcapFile: t.PcapFile, capDir: capDir, pubLink: pubLink, timing: f.Timing}
	for _, l := range t.Links {
		ln.linkOf = append(ln.linkOf, [2]string{l.A, l.Name})
	}
	if t.Medium != nil {
		for _, m := range t.Medium.Members {
			ln.linkOf = append(ln.linkOf, [2]string{m, t.Medium.Name})
		}
	}
	return ln, nil
}

type linkNet struct {
	n        *link.Network
	pcapFile string
	capDir   string
	pubLink  string
	linkOf   [][2]string // edge node -> its link to the broker
	timing   *TimingGuard
	once     sync.Once
	err      error
}

func (l *linkNet) Command(ctx context.Context, node, name string, args ...string) *exec.Cmd {
	return l.n.Command(ctx, node, name, args...)
}

// Addr returns node's address on the link that from uses to reach it.
func (l *linkNet) Addr(node, from string) string {
	for _, lo := range l.linkOf {
		if lo[0] == from {
			if a := l.n.AddrOn(node, lo[1]); a.IsValid() {
				return a.String()
			}
		}
	}
	return l.n.Addr(node).String()
}

func (l *linkNet) Counters() ([]LinkCounter, error) {
	var out []LinkCounter
	for _, s := range l.n.Stats() {
		out = append(out, LinkCounter{Link: s.Link, Direction: s.Direction(), Packets: int64(s.Arrived), Bytes: int64(s.ArrivedBytes),
			DropRandom: int64(s.DropRandom), DropQueue: int64(s.DropQueue + s.DropMTU), DropRetries: int64(s.DropRetries), DropDown: int64(s.DropDown), DropNAT: int64(s.DropNAT)})
	}
	return out, nil
}

func (l *linkNet) CongestionControl(node string) string {
	cc, err := l.n.CongestionControl(node)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return cc
}

func (l *linkNet) Close() error {
	l.once.Do(func() {
		l.timing.Record(l.n.Lateness())
		l.err = l.n.Close()
		if l.pcapFile != "" {
			src := filepath.Join(l.capDir, l.pubLink+"-"+NodePub+".pcap")
			if err := os.Rename(src, l.pcapFile); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.err = errors.Join(l.err, fmt.Errorf("pcap: %w", err))
			}
		}
	})
	return l.err
}
