package link

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// Topology is what Up builds: nodes (one network namespace each), point-to-
// point links between two nodes, and shared media (one hub, several
// stations on one channel).
type Topology struct {
	Nodes []Node
	Links []Link
	Media []Medium
}

// Node is one network namespace.
type Node struct {
	// Name is short: letters, digits, '-' and '_', at most 24 characters.
	Name string
	// Host places the node in the host's (the calling process's) network
	// namespace instead of a new one. At most one node may be the host; it
	// may have one link (used by "iotq link shell").
	Host bool
	// CongestionControl pins net.ipv4.tcp_congestion_control in the node's
	// namespace ("cubic", "bbr", "reno"). Empty means Options.
	// CongestionControl, and if that is empty the namespace's default.
	CongestionControl string
}

// Link is a point-to-point link between nodes A and B. Each link is its own
// /24 subnet: A gets .1 and B gets .2.
type Link struct {
	Name       string
	A, B       string
	AtoB, BtoA Params
	// Direction says which directions carry the impairment: both (the
	// default), up (A to B only: shaping the egress of A, as tc on A's
	// interface does) or down (B to A only). The other direction is clean:
	// no delay, loss, rate or schedule, only counted.
	Direction Direction
}

// Direction names the directions of a link that carry its impairment.
type Direction string

// Directions of a Link. The zero value means DirectionBoth.
const (
	DirectionBoth Direction = "both"
	DirectionUp   Direction = "up"   // A to B only (the egress of A)
	DirectionDown Direction = "down" // B to A only (the egress of B)
)

// ParseDirection reads a direction: "up" (or "a_to_b"), "down" (or
// "b_to_a") or "both"; empty means both.
func ParseDirection(s string) (Direction, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "both":
		return DirectionBoth, nil
	case "up", "a_to_b":
		return DirectionUp, nil
	case "down", "b_to_a":
		return DirectionDown, nil
	}
	return "", fmt.Errorf("direction %q is unknown: use up (A to B only), down (B to A only) or both", s)
}

// Impaired returns the parameters each direction of l runs with: AtoB and
// BtoA, with the direction that Direction leaves clean reduced to a
// perfect link of the same MTU.
func (l Link) Impaired() (atob, btoa Params) {
	atob, btoa = l.AtoB, l.BtoA
	switch l.Direction {
	case DirectionUp:
		btoa = Params{MTU: btoa.MTU}
	case DirectionDown:
		atob = Params{MTU: atob.MTU}
	}
	return atob, btoa
}

// Medium is a shared medium: Hub and Stations share one channel (see
// MediumParams) on one /24 subnet: the hub gets .1, station i gets .(i+2).
// Frames are routed by destination address; stations may reach each other
// through the medium too (one hop on the channel).
type Medium struct {
	Name     string
	Hub      string
	Stations []string
	MediumParams
}

// Options configure Up. The zero value is usable.
type Options struct {
	// Prefix starts the name of every namespace this run creates, and
	// identifies the ones a crashed run left behind. Empty means "iotq-".
	Prefix string
	// Logger receives setup, teardown and notices; nil discards.
	Logger *slog.Logger
	// CaptureDir, when set, receives one pcap file per link end
	// (LINK-NODE.pcap), with what that node's interface sent and received.
	CaptureDir string
	// Seed makes the random decisions (loss, jitter, retries) repeatable.
	// Zero picks a random seed; Network.Seed reports the one used.
	Seed uint64
	// CongestionControl is pinned in every node's namespace unless the node
	// names its own. Empty leaves the namespace default.
	CongestionControl string
	// NoRealTime skips the attempt to run the forwarding thread with
	// SCHED_FIFO priority.
	NoRealTime bool
	// RealTimeProcess also raises every other thread of this process to
	// SCHED_RR priority 40 (the forwarding thread has SCHED_FIFO 50), as
	// running the whole process under "chrt -r" would, but with reset-on-fork so
	// child processes (nodes started with Command) stay normal. New threads
	// are raised within a second. Close returns them to SCHED_NORMAL. Use
	// it when this process is a dedicated emulator (a lab run): it keeps
	// the reader goroutines from waiting behind CPU-bound processes, which
	// is what makes the delay error small on a loaded machine. A CPU-bound
	// goroutine in this process then competes at real-time priority (the
	// kernel's RT throttling still leaves 5 % to others).
	RealTimeProcess bool
}

// DefaultPrefix is the name prefix of Options.Prefix when empty.
const DefaultPrefix = "iotq-"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,23}$`)

// Validate reports every problem of the topology.
func (t Topology) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	nodes := map[string]bool{}
	hosts := 0
	for i, n := range t.Nodes {
		if !nameRE.MatchString(n.Name) {
			bad("nodes[%d]: name %q must be 1-24 letters, digits, '-' or '_'", i, n.Name)
		}
		if nodes[n.Name] {
			bad("nodes[%d]: name %q is used twice", i, n.Name)
		}
		nodes[n.Name] = true
		if n.Host {
			hosts++
		}
	}
	if hosts > 1 {
		bad("nodes: only one node may be the host namespace")
	}
	if len(t.Nodes) == 0 {
		bad("nodes: a topology needs at least one node")
	}
	names := map[string]bool{}
	checkName := func(path, name string) {
		if !nameRE.MatchString(name) {
			bad("%s: name %q must be 1-24 letters, digits, '-' or '_'", path, name)
		}
		if names[name] {
			bad("%s: name %q is used by another link or medium", path, name)
		}
		names[name] = true
	}
	checkNode := func(path, n string) {
		if !nodes[n] {
			bad("%s: node %q is not in nodes", path, n)
		}
	}
	for i, l := range t.Links {
		path := fmt.Sprintf("links[%d]", i)
		checkName(path, l.Name)
		checkNode(path+".a", l.A)
		checkNode(path+".b", l.B)
		if l.A == l.B {
			bad("%s: a link needs two different nodes, got %q twice", path, l.A)
		}
		switch l.Direction {
		case "", DirectionBoth, DirectionUp, DirectionDown:
		default:
			bad("%s: direction %q is unknown: use up (a to b only), down (b to a only) or both", path, l.Direction)
		}
		for _, c := range []struct {
			dir  string
			p    Params
			gone Direction
		}{{"a_to_b", l.AtoB, DirectionDown}, {"b_to_a", l.BtoA, DirectionUp}} {
			if l.Direction == c.gone && c.p.rebinds() {
				bad("%s.%s: a rebind step in a direction that direction %q leaves clean would never run: use direction both", path, c.dir, l.Direction)
			}
		}
		if err := l.AtoB.Validate(path + ".a_to_b"); err != nil {
			errs = append(errs, err)
		}
		if err := l.BtoA.Validate(path + ".b_to_a"); err != nil {
			errs = append(errs, err)
		}
	}
	for i, m := range t.Media {
		path := fmt.Sprintf("media[%d]", i)
		checkName(path, m.Name)
		checkNode(path+".hub", m.Hub)
		if len(m.Stations) == 0 {
			bad("%s: a medium needs at least one station", path)
		}
		if len(m.Stations) > 200 {
			bad("%s: at most 200 stations", path)
		}
		seen := map[string]bool{m.Hub: true}
		for j, s := range m.Stations {
			checkNode(fmt.Sprintf("%s.stations[%d]", path, j), s)
			if seen[s] {
				bad("%s.stations[%d]: node %q appears twice on the medium", path, j, s)
			}
			seen[s] = true
		}
		if err := m.Validate(path); err != nil {
			errs = append(errs, err)
		}
	}
	if len(t.Links)+len(t.Media) > 250 {
		bad("at most 250 links and media")
	}
	for _, n := range t.Nodes {
		if n.Host {
			c := 0
			for _, l := range t.Links {
				if l.A == n.Name || l.B == n.Name {
					c++
				}
			}
			for _, m := range t.Media {
				if m.Hub == n.Name {
					c++
				}
				for _, s := range m.Stations {
					if s == n.Name {
						c++
					}
				}
			}
			if c > 1 {
				bad("node %q: the host node may have only one link", n.Name)
			}
		}
	}
	return errors.Join(errs...)
}
