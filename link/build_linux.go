// Building a topology: nodes, links and media become namespaces, TUN
// devices, subnets and the models of their directions.

package link

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

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
		if err := n.addNamespace(ctx, st); err != nil {
			return err
		}
	}
	var plan subnetPlan
	defer plan.release()
	maxMTU := DefaultMTU
	n.start = monoNow()
	for k, l := range topo.Links {
		mtu := max(l.AtoB.mtu(), l.BtoA.mtu())
		maxMTU = max(maxMTU, mtu)
		if err := n.addLink(ctx, &plan, k, l, mtu); err != nil {
			return err
		}
	}
	for k, m := range topo.Media {
		mtu := m.MTU
		if mtu == 0 {
			mtu = DefaultMTU
		}
		maxMTU = max(maxMTU, mtu)
		if err := n.addMedium(ctx, &plan, k, m, mtu); err != nil {
			return err
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
	for _, nd := range topo.Nodes {
		cc := nd.CongestionControl
		if cc == "" && !nd.Host {
			cc = n.opts.CongestionControl
		}
		if cc == "" {
			continue
		}
		if err := n.SetCongestionControl(nd.Name, cc); err != nil {
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

// addLink builds the k-th point-to-point link: its subnet, a TUN at each
// end, and the model of each direction.
func (n *Network) addLink(ctx context.Context, plan *subnetPlan, k int, l Link, mtu int) error {
	pfx, err := plan.pick(n.nodes[l.A].host || n.nodes[l.B].host, 77, k)
	if err != nil {
		return err
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
	ab, ba := l.Impaired()
	rtt := ab.Delay + ba.Delay
	dab := NewDir(ab, rtt, n.start, mix(n.seed, uint64(2*k)))
	dba := NewDir(ba, rtt, n.start, mix(n.seed, uint64(2*k+1)))
	n.dirs = append(n.dirs, dab, dba)
	pab := &path{mu: new(sync.Mutex), arrive: dab.Arrive, serve: dab.Serve, wake: dab.Wake, stats: dab.Stats,
		out: b, link: l.Name, from: l.A, to: l.B}
	pba := &path{mu: new(sync.Mutex), arrive: dba.Arrive, serve: dba.Serve, wake: dba.Wake, stats: dba.Stats,
		out: a, link: l.Name, from: l.B, to: l.A}
	pab.refuse, pba.refuse = dab.Refuse, dba.Refuse
	pab.dir, pba.dir = dab, dba
	if t := newNAT(ab); t != nil { // a sits behind it
		pab.natOut, pba.natIn = t, t
		n.nats = append(n.nats, t)
	}
	if t := newNAT(ba); t != nil { // b sits behind it
		pba.natOut, pab.natIn = t, t
		n.nats = append(n.nats, t)
	}
	a.route = func([4]byte) *path { return pab }
	b.route = func([4]byte) *path { return pba }
	n.paths = append(n.paths, pab, pba)
	for _, e := range []*endpoint{a, b} {
		sn.addrs[e.node.name] = e.addr
		sn.ifs[e.node.name] = e.ifname
	}
	return nil
}

// addMedium builds the k-th shared medium: its subnet, a TUN per member,
// one model shared by all and a route table per sender.
func (n *Network) addMedium(ctx context.Context, plan *subnetPlan, k int, m Medium, mtu int) error {
	members := append([]string{m.Hub}, m.Stations...)
	host := false
	for _, name := range members {
		host = host || n.nodes[name].host
	}
	pfx, err := plan.pick(host, 78, k)
	if err != nil {
		return err
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
	var evs []Event // guarded by mu
	for i := range members {
		table := make([]*path, len(members))
		for j := range members {
			if i == j {
				continue
			}
			p := &path{mu: mu,
				arrive: func(now time.Duration, size int, ref any) []Event {
					v := model.Arrive(now, i, j, size)
					evs = append(evs[:0], Event{Ref: ref, Size: size, Depart: v.Depart, Wait: v.Wait, Drop: v.Drop})
					return evs
				},
				stats: func() DirStats { return model.Stats(i, j) },
				out:   eps[j], link: m.Name, from: members[i], to: members[j]}
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
	return nil
}
