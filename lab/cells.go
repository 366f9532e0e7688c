package lab

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
)

// LinkParams are the resolved parameters of one emulated link
// (records.LinkParams: the lab records them in done.json and the manifest).
type LinkParams = records.LinkParams

// Cell is one point of a campaign (records.Cell): a single combination of
// link, transport and traffic parameters, run Repetitions times.
type Cell = records.Cell

// estimate is the expected duration of the cell from its plan, for `lab
// list`, `lab show` and the progress bar's ETA. Its constants are
// calibrated against finished runs (done.json start and end of every
// cell; docs/lab.md "Wall-time estimates"): a cell's set-up and teardown
// take about 0.3 s on the link fabric, a repetition about 50 ms besides
// its traffic, a handshake a few round trips, and a lost packet a
// retransmission timeout (at least 200 ms, TCP's minimum RTO; more on
// long paths: half the round trip). Calibration: smoke (15 cells, one at
// a time) ran 37 s; e3a 3.2 min; e8 reduced (2 at once) 31 min; e5 (18 at
// once) 20 min.
func estimate(c Cell) time.Duration {
	rtt := c.PathRTT()
	rto := max(200*time.Millisecond, rtt/2)
	// every packet of a message's exchange crosses the impaired link about
	// twice (data and its acknowledgement); each loss costs a timeout
	lossCost := time.Duration(c.PubLink.LossPct * 2 / 100 * float64(rto))
	// the grace is not counted: it bounds the wait for late messages, and a
	// repetition ends as soon as every message is in
	per := 50*time.Millisecond + 4*rtt
	if p, ok := patternByName(c.Pattern); ok {
		per += p.traffic(c, rtt, lossCost)
	}
	start := 300 * time.Millisecond
	if c.ProtocolName() == records.ProtocolAMQP {
		start += 5 * time.Second // the JVM and Artemis
	}
	return start + time.Duration(c.Repetitions)*per
}

// Cells expands specs into cells, in a deterministic order: experiment,
// profile, loss, sub link, publishers, retries, pattern, QoS, size,
// interval, and transport innermost (so the transports of one
// configuration run back to back). Specs must be valid.
func Cells(specs []Spec) ([]Cell, error) {
	var cells []Cell
	seen := map[string]bool{}
	for _, raw := range specs {
		if err := raw.Validate(); err != nil {
			return nil, fmt.Errorf("experiment %s: %w", raw.Experiment, err)
		}
		s := raw.withDefaults()
		subLinks := s.Topology.SubLinks
		if len(subLinks) == 0 {
			subLinks = []LinkSpec{{}} // derived from the profile below
		}
		pubs, retries := []int{1}, []int{0}
		if s.Topology.Kind == KindSharedMedium {
			pubs, retries = s.Topology.Publishers, s.Topology.Retries
		}
		for _, prof := range s.Profiles {
			pubLink, _ := s.linkOf(prof)
			pubLink.QueueBytes = s.Topology.QueueBytes
			for _, loss := range s.Losses {
				pubLink.LossPct = float64(loss)
				for _, burst := range s.LossBursts {
					pubLink.BurstLen = 0
					if loss > 0 {
						pubLink.BurstLen = burst
					} else if burst != s.LossBursts[0] {
						continue // without loss there are no bursts: one cell
					}
					for _, dir := range s.Topology.Directions {
						pubLink.Direction = ""
						if dir != DirectionBoth {
							pubLink.Direction = dir
						}
						for _, sl := range subLinks {
							var subLink LinkParams
							switch {
							case sl.Name != "":
								subLink = LinkParams{Name: sl.Name, RateBps: int64(sl.Rate), DelayNs: int64(sl.oneWay()), QueueBytes: s.Topology.QueueBytes, Trace: sl.Trace}
							case s.Topology.Kind == KindPubBrokerSub && s.Topology.Impaired == ImpairedBoth:
								subLink = pubLink
							default:
								eth, _ := link.ProfileByName("ethernet") // the wired default, whatever profile_defs say
								subLink = LinkParams{Name: eth.Name, RateBps: eth.Rate, DelayNs: int64(eth.OneWay().Delay), QueueBytes: s.Topology.QueueBytes}
							}
							for _, n := range pubs {
								for _, r := range retries {
									for _, pat := range s.Patterns {
										for _, change := range s.pathChangesOf(pat) {
											for _, q := range s.QoS {
												for _, size := range s.PayloadSizes {
													for _, iv := range s.Intervals {
														for _, cell := range withPolicies(s, s.Transports, pat, q) {
															tr := cell.transport
															c := Cell{
																Experiment: s.Experiment, Profile: prof, LossPct: float64(loss),
																Transport: tr, QoS: q, Size: size, Pattern: pat,
																IntervalNs: int64(iv), Messages: s.Messages, Repetitions: s.Repetitions,
																Kind: s.Topology.Kind, Publishers: n, Retries: r,
																DelayConvention: s.Delay, PubLink: pubLink, SubLink: subLink,
																TCPCongestion: s.TCPCongestion, GraceNs: int64(s.Grace),
																Protocol: ProtocolOf(tr), QUIC0RTT: cell.policy, QUICStreams: cell.streams,
																Reconnect: s.Reconnect,
															}
															if records.IsReconnectPattern(pat) {
																c.Messages = 1
															}
															s.setPathChange(&c, change)
															if pat == PatternMultiTopic {
																c.Topics, c.LargeSize, c.LargeIntervalNs = s.Topics, cell.large.Size, int64(cell.large.Interval)
															}
															c.ID = cellID(c, len(s.Topology.SubLinks) > 0)
															if seen[c.ID] {
																return nil, fmt.Errorf("experiment %s: two cells share the id %s: give the experiments distinct names", s.Experiment, c.ID)
															}
															seen[c.ID] = true
															c.Seed = cellSeed(s.Seed, c.ID)
															cells = append(cells, c)
														}
													}
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return cells, nil
}

// transportPolicy is a transport and, for MQTT over QUIC, the broker's
// QUIC 0-RTT policy and the clients' stream strategy (Cell.QUICStreams) of
// one cell; for pattern multi-topic also its large-message topic.
type transportPolicy struct {
	transport string
	policy    records.EarlyPolicy
	streams   string
	large     LargeMessage
}

// withPolicies expands the transports by the spec's QUIC 0-RTT policies,
// stream strategies and datagram choices: every combination for MQTT over
// QUIC (in the order listed, right after each other), none for the other
// transports. Pattern multi-topic repeats them per large-message choice
// (each one's transports back to back) and makes datagram cells at QoS 0
// only (qos).
func withPolicies(s Spec, transports []string, pattern string, qos int) []transportPolicy {
	var out []transportPolicy
	for _, large := range largeMessagesOf(s, pattern) {
		for _, tr := range transports {
			if tr != TransportQUIC {
				out = append(out, transportPolicy{tr, "", "", large})
				continue
			}
			for _, p := range s.QUIC0RTT {
				for _, st := range s.QUICStreamStrategies {
					for _, dg := range s.QUICDatagrams {
						if dg && qos != 0 {
							continue // only QoS 0 goes as datagrams (Validate refuses it elsewhere)
						}
						out = append(out, transportPolicy{tr, p, quicStreams(st, dg), large})
					}
				}
			}
		}
	}
	return out
}

// datagramsSuffix marks, in Cell.QUICStreams, clients that send QoS 0 as
// QUIC datagrams ("control+datagrams").
const datagramsSuffix = "+datagrams"

// quicStreams is the Cell.QUICStreams of a stream strategy and datagram
// choice.
func quicStreams(strategy string, datagrams bool) string {
	if datagrams {
		return strategy + datagramsSuffix
	}
	return strategy
}

// quicStreamsOf splits a cell's QUICStreams into the clients' stream
// strategy and datagram choice; a cell without one (not MQTT over QUIC,
// or written before version 5) reads as control without datagrams.
func quicStreamsOf(c Cell) (strategy string, datagrams bool) {
	strategy, datagrams = strings.CutSuffix(c.QUICStreams, datagramsSuffix)
	if strategy == "" {
		strategy = transport.StrategyControl
	}
	return strategy, datagrams
}

// cellID names a cell; it is stable for a given spec and scale and safe as
// a directory name.
func cellID(c Cell, namedSub bool) string {
	parts := []string{c.Experiment, c.Profile, "loss" + trimFloat(c.LossPct)}
	if c.PubLink.BurstLen > 0 {
		parts = append(parts, "burst"+trimFloat(c.PubLink.BurstLen))
	}
	if c.PubLink.OneDirection() {
		// Cells impaired in both directions keep the ids they had before
		// directions existed (they measured that).
		parts = append(parts, c.PubLink.Direction)
	}
	if namedSub {
		parts = append(parts, "sub-"+c.SubLink.Name)
	}
	if c.Kind == KindSharedMedium {
		parts = append(parts, fmt.Sprintf("n%d", c.Publishers), fmt.Sprintf("r%d", c.Retries))
	}
	parts = append(parts, c.Pattern)
	if c.PathChange != "" {
		parts = append(parts, c.PathChange)
	}
	parts = append(parts, fmt.Sprintf("qos%d", c.QoS), fmt.Sprintf("%dB", c.Size))
	if c.Pattern == PatternPeriodic || c.Pattern == PatternMultiTopic || c.Kind == KindSharedMedium {
		parts = append(parts, "every"+c.Interval().String())
	}
	parts = append(parts, multiTopicIDParts(c)...) // lab/e9.go; none for other patterns
	parts = append(parts, c.Transport)
	if c.QUIC0RTT != "" && c.QUIC0RTT != records.EarlyHold {
		// the broker's default keeps the ids cells had before the policy
		// was a setting
		parts = append(parts, "0rtt-"+string(c.QUIC0RTT))
	}
	if c.Transport == TransportQUIC {
		// named only when not the default, which keeps the ids cells had
		// before the strategy was a setting
		strategy, dg := quicStreamsOf(c)
		if strategy != transport.StrategyControl {
			parts = append(parts, strategy)
		}
		if dg {
			parts = append(parts, "dgram")
		}
	}
	id := strings.Join(parts, "_")
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, id)
}

func trimFloat(f float64) string { return Percent(f).String() }

func cellSeed(base int64, id string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", base, id)
	return int64(h.Sum64() & (1<<63 - 1))
}

// Shard keeps every n-th cell starting at index i (0-based): cell k is
// kept when k mod n == i. n = 1 keeps all.
func Shard(cells []Cell, i, n int) []Cell {
	if n <= 1 {
		return cells
	}
	var out []Cell
	for k, c := range cells {
		if k%n == i {
			out = append(out, c)
		}
	}
	return out
}

// ParseShard parses "i/n" with 1 <= i <= n (1-based, as array jobs count)
// and returns i-1 and n.
func ParseShard(s string) (int, int, error) {
	var i, n int
	if _, err := fmt.Sscanf(s, "%d/%d", &i, &n); err != nil || fmt.Sprintf("%d/%d", i, n) != strings.TrimSpace(s) {
		return 0, 0, fmt.Errorf("shard %q: want i/n, for example 2/4 (the second of four shards)", s)
	}
	if n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("shard %q: want 1 <= i <= n", s)
	}
	return i - 1, n, nil
}
