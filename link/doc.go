// Package link is iotq's packet-level link emulator: real kernel TCP and
// real QUIC between network namespaces, through emulated WiFi, cellular and
// satellite links (delay, jitter, loss, rate, queue), without netem.
//
// # Pieces
//
//   - The pure model (Dir and MediumModel): given a packet's
//     arrival time and size it decides drop or departure time. Per direction:
//     loss (Bernoulli or Gilbert-Elliott) -> queue stage (a Queue from the
//     registry: droptail or drophead, limited in bytes and/or packets,
//     default one bandwidth-delay product; see ParseQueue) -> serialization
//     at the rate ->
//     propagation delay plus jitter (normal, uniform, pareto), without
//     reordering unless Params.Reorder. A shared medium (MediumModel) has
//     one channel for all senders and link-layer retries. The model has no
//     clock: tests drive it with an injected time and need no root.
//   - The plumbing (Up): one network namespace per node, one TUN device per
//     link end created in the host namespace and moved into the node's
//     namespace; this process keeps every TUN file descriptor and forwards
//     IPv4 packets between them. Departures wait in a min-heap woken by a
//     timerfd, served by one OS thread that asks for SCHED_FIFO priority.
//   - Impairment direction (Link.Direction): both directions, or only A to
//     B ("up", the egress of A) or B to A ("down"); the other passes clean
//     and counted.
//   - Accounting (Stats) and optional pcap capture per link end.
//   - Profiles (wifi, cellular, satellite, ethernet) with the delay stated
//     explicitly as one-way (Profile.OneWay) or round trip (Profile.RTT).
//
// Entry points: Up (a Topology of nodes, links and media), Shell (one link
// between a fresh namespace and the host, for "iotq link shell"),
// ParseTopology (YAML), ProfileByName, ParseRate, ParseLoss, ParseDuration.
// A running Network gives Command (run a program in a node), Do (create
// sockets in a node from this process), Addr/AddrOn, CongestionControl,
// Stats, EndStats, Lateness and Close. The design note is docs/link.md.
//
// # Lifecycle and concurrency
//
// Up builds a Network and starts its goroutines: one reader per TUN and one
// forwarding thread. Network.Close stops them, closes every TUN and deletes
// every namespace; it is idempotent and safe to call from any goroutine.
// Network methods are safe for concurrent use. Dir and MediumModel are not:
// the Network guards each with its own mutex.
//
// Files, one concern each: model.go (the pure model), queue.go (the queue
// stage and its registry), build_linux.go
// (topology to namespaces and TUNs), plumbing_linux.go (TUN, ip, setns),
// subnet_linux.go (address plan and the host subnet lock),
// forward_linux.go (readers, departure heap, forwarding thread),
// timer_linux.go (monotonic clock, timerfd), realtime_linux.go
// (SCHED_FIFO), sysctl_linux.go (congestion control), cleanup_linux.go
// (stale namespaces), network_linux.go (the Network's lifecycle and
// accessors).
//
// Names: every namespace is called PREFIX<pid>-<token>-<node> (Options.Prefix,
// default "iotq-"), so a later run (or Cleanup) can tell namespaces of a
// dead process from those of a live one and remove only the stale ones.
//
// Imports: link depends on the standard library, golang.org/x/sys/unix,
// hdrhistogram-go and yaml; it never imports broker, client, lab or report.
package link
