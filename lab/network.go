package lab

import (
	"context"
	"os/exec"
	"strconv"

	"github.com/iotq/iotq/records"
)

// Node names of a cell's topology. On a shared medium the measured
// publisher is "pub" and the others are "pub2" ... "pubN".
const (
	NodePub    = records.NodePub
	NodeBroker = records.NodeBroker
	NodeSub    = records.NodeSub
)

// Topology is the network of one cell in the lab's terms; a Fabric turns
// it into namespaces and emulated links.
type Topology struct {
	// Nodes in creation order.
	Nodes []string
	// Links are point-to-point links; A is the edge node (publisher or
	// subscriber), B the broker.
	Links []TopoLink
	// Medium, when set, is a shared access medium from Members to Hub.
	Medium *Medium
	// TCPCongestion is pinned in every node's namespace.
	TCPCongestion string
	// Seed of the emulator's random number generators.
	Seed int64
	// PcapFile, when set, asks for a capture of the publisher's link end.
	PcapFile string
	// PubNAT puts a rebinding NAT in front of the publisher on its link
	// (pattern path-change, E10), for PathChanger.ChangePath.
	PubNAT bool
}

// TopoLink is one point-to-point link.
type TopoLink struct {
	Name   string
	A, B   string
	Params LinkParams
}

// Medium is a shared access medium (a WiFi cell).
type Medium struct {
	Name    string
	Hub     string
	Members []string
	// Params: rate shared by all senders, delay, frame error rate (LossPct).
	Params  LinkParams
	Retries int
}

// LinkCounter is one direction of one link, cumulative since Up.
type LinkCounter struct {
	Link        string `json:"link"`
	Direction   string `json:"direction"`
	Packets     int64  `json:"packets"`
	Bytes       int64  `json:"bytes"`
	DropRandom  int64  `json:"drop_random"`
	DropQueue   int64  `json:"drop_queue"`
	DropRetries int64  `json:"drop_retries"`
	DropDown    int64  `json:"drop_down"`
	DropNAT     int64  `json:"drop_nat"`
}

// Network is a running topology. Implementations must allow Command and
// Addr from several goroutines; Close is idempotent.
type Network interface {
	// Command returns a command that runs in node's namespace.
	Command(ctx context.Context, node, name string, args ...string) *exec.Cmd
	// Addr is the address (no port) that node from uses to reach node.
	Addr(node, from string) string
	// Counters returns the cumulative counters of every link direction.
	Counters() ([]LinkCounter, error)
	// CongestionControl reports the TCP congestion control in effect in
	// node's namespace (what was really set, for the records).
	CongestionControl(node string) string
	// Close tears the topology down.
	Close() error
}

// Fabric builds networks. The real one uses package link (namespaces,
// TUN, emulated links; needs root); LocalFabric runs every node on the
// host's loopback without any emulation, for tests and dry runs.
type Fabric interface {
	Up(ctx context.Context, t Topology) (Network, error)
	// Name describes the fabric for the manifest ("link", "local").
	Name() string
}

// BuildTopology returns the topology of a cell.
func BuildTopology(c Cell, pcapFile string) Topology {
	t := Topology{TCPCongestion: c.TCPCongestion, Seed: c.Seed, PcapFile: pcapFile}
	if c.Kind == KindSharedMedium {
		t.Nodes = []string{NodeBroker, NodeSub, NodePub}
		members := []string{NodePub}
		for i := 2; i <= c.Publishers; i++ {
			n := pubName(i)
			t.Nodes = append(t.Nodes, n)
			members = append(members, n)
		}
		t.Medium = &Medium{Name: "medium", Hub: NodeBroker, Members: members, Params: c.PubLink, Retries: c.Retries}
		t.Links = []TopoLink{{Name: "sub", A: NodeSub, B: NodeBroker, Params: c.SubLink}}
		return t
	}
	t.Nodes = []string{NodeBroker, NodeSub, NodePub}
	t.PubNAT = c.Pattern == PatternPathChange
	t.Links = []TopoLink{
		{Name: "pub", A: NodePub, B: NodeBroker, Params: c.PubLink},
		{Name: "sub", A: NodeSub, B: NodeBroker, Params: c.SubLink},
	}
	return t
}

func pubName(i int) string {
	if i <= 1 {
		return NodePub
	}
	return "pub" + strconv.Itoa(i)
}

// LocalFabric runs every node as a plain child process on the host: all
// addresses are 127.0.0.1, nothing is emulated, no counters. It needs no
// privileges. Safe for concurrent use.
type LocalFabric struct{}

// Name returns "local".
func (LocalFabric) Name() string { return "local" }

// Up returns a loopback network.
func (LocalFabric) Up(ctx context.Context, t Topology) (Network, error) { return localNet{}, nil }

type localNet struct{}

func (localNet) Command(ctx context.Context, node, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}
func (localNet) Addr(string, string) string       { return "127.0.0.1" }
func (localNet) Counters() ([]LinkCounter, error) { return nil, nil }
func (localNet) CongestionControl(string) string  { return hostCongestionControl() }
func (localNet) Close() error                     { return nil }
