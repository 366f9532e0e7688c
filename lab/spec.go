package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/yamlconf"
	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/link/profile"
	"github.com/iotq/iotq/link/trace"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
	"go.yaml.in/yaml/v3"
)

// Topology kinds.
const (
	// KindPubBrokerSub is publisher -[link]- broker -[link]- subscriber.
	KindPubBrokerSub = records.KindPubBrokerSub
	// KindSharedMedium is N publishers sharing one access medium to the
	// broker, and a wired broker-subscriber link.
	KindSharedMedium = records.KindSharedMedium
)

// Which links of a pub-broker-sub topology carry the profile.
const (
	ImpairedPublisher = "publisher" // publisher link impaired, broker-subscriber link clean (E1-E3)
	ImpairedBoth      = "both"      // both links impaired alike (E4, E5)
)

// Impairment directions of a link (TopologySpec.Directions).
const (
	DirectionBoth    = records.DirectionBoth
	DirectionEgress  = records.DirectionEgress  // the edge node's outgoing packets only (E1-E3)
	DirectionIngress = records.DirectionIngress // towards the edge node only
)

// Delay conventions: what a profile's delay figure means.
const (
	DelayOneWay = records.DelayOneWay
	DelayRTT    = records.DelayRTT
)

// Transports (URL schemes of the broker listeners, transport/endpoint's
// scheme table). The scheme says the protocol too: MQTT cells run
// `iotq broker`, AMQP cells ActiveMQ Artemis (with `iotq gateway` in front
// for amqp+quic) in the broker's namespace.
const (
	TransportTLS      = "mqtts"     // MQTT over TCP + TLS 1.3
	TransportQUIC     = "quic"      // MQTT over QUIC
	TransportAMQPS    = "amqps"     // AMQP 1.0 over TCP + TLS 1.3, straight to Artemis
	TransportAMQPQUIC = "amqp+quic" // AMQP 1.0 over QUIC through iotq gateway next to Artemis
	TransportMQTT     = "mqtt"      // MQTT over plain TCP
	TransportCoAP     = "coap"      // CoAP over UDP (RFC 7252 confirmable messages)
	TransportCoAPQUIC = "coap+quic" // CoAP over QUIC (experimental framing of iotq)
)

// labTransports are the schemes the lab can start a broker for, by
// protocol.
func labTransports() map[endpoint.Protocol][]endpoint.Scheme {
	return map[endpoint.Protocol][]endpoint.Scheme{
		endpoint.ProtocolMQTT: {endpoint.SchemeMQTT, endpoint.SchemeMQTTS, endpoint.SchemeWS, endpoint.SchemeWSS, endpoint.SchemeQUIC},
		endpoint.ProtocolAMQP: {endpoint.SchemeAMQP, endpoint.SchemeAMQPS, endpoint.SchemeAMQPQUIC},
		endpoint.ProtocolCoAP: {endpoint.SchemeCoAP, endpoint.SchemeCoAPTCP, endpoint.SchemeCoAPQUIC},
	}
}

// LabTransports lists the transports a scenario may name.
func LabTransports() []string {
	var out []string
	for _, p := range []endpoint.Protocol{endpoint.ProtocolMQTT, endpoint.ProtocolAMQP, endpoint.ProtocolCoAP} {
		for _, s := range labTransports()[p] {
			out = append(out, string(s))
		}
	}
	return out
}

// ProtocolOf returns the application protocol of a lab transport ("mqtt",
// "amqp"), "" for an unknown scheme.
func ProtocolOf(transport string) string {
	r, ok := endpoint.Lookup(transport)
	if !ok || string(r.Scheme) != transport {
		return ""
	}
	return string(r.Protocol)
}

// Traffic patterns.
const (
	PatternPeriodic    = records.PatternPeriodic
	PatternStopAndWait = records.PatternStopAndWait
	PatternReconnect   = records.PatternReconnect
	// PatternReconnectEarly is pattern B whose resumed publisher writes its
	// first QoS 1 PUBLISH with CONNECT (`iotq pub --early`; QUIC: in the
	// 0-RTT flight), its receipt completing on the PUBACK.
	PatternReconnectEarly = records.PatternReconnectEarly
	PatternBatch          = records.PatternBatch       // E8: a batch on a fresh connection per repetition
	PatternBatchResume    = records.PatternBatchResume // E8: the same, resuming (TLS resumption, QUIC 0-RTT)
	PatternBatchEcho      = records.PatternBatchEcho   // E8: a fresh batch whose receiver echoes each message back
	PatternClosedLoop     = records.PatternClosedLoop  // E7: next message once the previous one's receipt completed
	PatternPathChange     = records.PatternPathChange  // E10: the publisher's path changes mid-stream (lab/e10.go)
	PatternMultiTopic     = records.PatternMultiTopic  // E9: one connection, several topics (lab/e9.go)
)

// Scales.
const (
	ScaleSmoke   = "smoke"
	ScaleReduced = "reduced"
	ScaleFull    = "full"
)

// Spec is one experiment: the sweep of link, transport and traffic
// parameters that expands into cells. The zero value of every field has a
// documented default (see withDefaults); Validate reports all problems at
// once. A scenario file holds one Spec per YAML document.
type Spec struct {
	// Experiment names the experiment ("E1"); it prefixes every cell id.
	// Required.
	Experiment  string       `yaml:"experiment"`
	Description string       `yaml:"description,omitempty"`
	Topology    TopologySpec `yaml:"topology"`
	// Profiles are link profile names (wifi, cellular, satellite, ethernet,
	// or one defined in ProfileDefs). Default [wifi].
	Profiles []string `yaml:"profiles"`
	// Delay says whether a profile's delay is one-way ("one-way", the
	// default) or a round trip ("rtt"; each direction gets half).
	Delay string `yaml:"delay"`
	// Losses in percent; random per packet. Default [0].
	Losses []Percent `yaml:"losses"`
	// LossBursts sweeps the mean length, in packets, of a loss burst: with
	// a value b > 0 the loss follows a Gilbert-Elliott model (every packet
	// lost in the bad state, none in the good one; link.GEBursts) whose
	// mean is the cell's loss and whose bursts are b packets long on
	// average. 0 is independent loss. Default [0].
	LossBursts []float64 `yaml:"loss_bursts,omitempty,flow"`
	// Transports are broker URL schemes; the scheme names the protocol
	// too: mqtts (MQTT over TCP+TLS), quic (MQTT over QUIC), amqps (AMQP
	// over TCP+TLS), amqp+quic (AMQP over QUIC through iotq gateway), and
	// mqtt, ws, wss, amqp. Default [mqtts, quic].
	Transports []string `yaml:"transports"`
	// QoS levels. Default [0].
	QoS []int `yaml:"qos"`
	// PayloadSizes in bytes (at least the measurement header). Default [100].
	PayloadSizes []int `yaml:"payload_sizes"`
	// Patterns: periodic, stop-and-wait, reconnect, reconnect-early, batch,
	// batch-resume, batch-echo, closed-loop, multi-topic.
	// Default [periodic].
	Patterns []string `yaml:"patterns"`
	// Topics (pattern multi-topic, E9) is how many periodic topics the
	// publisher sends on over its one connection, each messages messages
	// every interval. Default 10 with pattern multi-topic.
	Topics int `yaml:"topics,omitempty"`
	// LargeMessages (pattern multi-topic) sweeps the large-message topic
	// beside the periodic ones: {size: BYTES, interval: D} publishes one
	// message of BYTES every D while they run; {size: 0} is the cell
	// without one. Default [{size: 0}].
	LargeMessages []LargeMessage `yaml:"large_messages,omitempty,flow"`
	// QUIC0RTT sweeps the broker's QUIC 0-RTT policy (accept, hold,
	// refuse: `iotq broker --quic-0rtt`, docs/0rtt.md) over the cells of
	// MQTT over QUIC; other transports run one cell each, without it.
	// Default [hold], the broker's default.
	QUIC0RTT []records.EarlyPolicy `yaml:"quic_0rtt,omitempty,flow"`
	// QUICStreamStrategies sweeps the clients' stream strategy over the
	// cells of MQTT over QUIC (`iotq pub/sub --quic-stream-strategy`:
	// control, per-topic, per-publish; docs/mqtt-quic.md); other transports
	// run one cell each, without it. Default [control].
	QUICStreamStrategies []string `yaml:"quic_stream_strategies,omitempty,flow"`
	// QUICDatagrams sweeps whether the clients of MQTT over QUIC cells send
	// QoS 0 messages as QUIC datagrams (`--quic-datagrams`); true needs
	// qos: [0]. Default [false].
	QUICDatagrams []bool `yaml:"quic_datagrams,omitempty,flow"`
	// PathChanges (pattern path-change, E10) sweeps what happens to the
	// publisher's path ChangeAt into each repetition: rebind (its NAT
	// gives every flow a new port) or wifi-to-cellular (the link switches
	// from the wifi profile's delay and rate to cellular's and the NAT
	// rebinds). Default [rebind]; only with pattern path-change.
	PathChanges []string `yaml:"path_changes,omitempty,flow"`
	// ChangeAt is when the path changes, counted from the publisher's
	// start (pattern path-change). Default: half the stream
	// (messages x interval / 2).
	ChangeAt Duration `yaml:"change_at,omitempty"`
	// Intervals between publishes (periodic pattern; background publishers
	// of a shared medium). Default [1s].
	Intervals []Duration `yaml:"intervals"`
	// Messages per repetition. Default 100.
	Messages int `yaml:"messages"`
	// Repetitions per cell. Default 1.
	Repetitions int `yaml:"repetitions"`
	// Seed of the emulator's random loss; each cell derives its own from it.
	// Default 1.
	Seed int64 `yaml:"seed"`
	// TCPCongestion is pinned in every namespace. Default cubic.
	TCPCongestion string `yaml:"tcp_congestion"`
	// Grace is how long the subscriber may still receive after the last
	// publish (plus four times the path round trip). Default 3s.
	Grace Duration `yaml:"grace"`
	// Reconnect lets the periodic pattern's publishers dial again when
	// their connection is lost (`iotq pub --reconnect`, a persistent
	// session resumed from a ticket) instead of ending the cell: a device
	// does, and on bursty loss TCP's retransmission backoff can outlast
	// the MQTT client's keep-alive wait. What the lost connection held is
	// lost at QoS 0 and published again at QoS 1 and 2. Default false.
	Reconnect bool `yaml:"reconnect,omitempty"`
	// ProfileDefs adds or overrides link profiles by name.
	ProfileDefs map[string]LinkSpec `yaml:"profile_defs,omitempty"`
	// Energy holds the energy model parameters, recorded in the manifest for
	// the report. Zero fields take the defaults of DefaultEnergy.
	Energy EnergyModel `yaml:"energy"`
	// Scales override message counts and repetitions per scale
	// (smoke, reduced). "full" is the spec as written. A missing scale uses
	// the generic rule of Spec.Scaled.
	Scales map[string]ScaleSpec `yaml:"scales,omitempty"`
}

// TopologySpec describes the network of each cell.
type TopologySpec struct {
	// Kind: pub-broker-sub (default) or shared-medium.
	Kind string `yaml:"kind"`
	// Impaired (pub-broker-sub): publisher (default) or both.
	Impaired string `yaml:"impaired"`
	// Directions (pub-broker-sub) sweeps which direction of each impaired
	// link carries the impairment, seen from its edge node: egress (the
	// publisher's outgoing packets only: traffic control on the device's
	// interface, the E1-E3 testbed), ingress, or both. Default [both].
	Directions []string `yaml:"directions,omitempty,flow"`
	// SubLinks sweeps explicit broker-subscriber links (E4b, E6). When empty
	// the broker-subscriber link is ethernet (impaired=publisher) or the
	// profile (impaired=both).
	SubLinks []LinkSpec `yaml:"sub_links,omitempty"`
	// Publishers (shared-medium): numbers of publishers N to sweep. Default [3].
	Publishers []int `yaml:"publishers,omitempty"`
	// Retries (shared-medium): link-layer retries R to sweep. Default [0].
	Retries []int `yaml:"retries,omitempty"`
	// QueueBytes limits each link's queue; 0 means one bandwidth-delay product.
	QueueBytes int `yaml:"queue_bytes,omitempty"`
}

// LinkSpec is a named set of link parameters (a profile or a sub link).
type LinkSpec struct {
	Name string `yaml:"name,omitempty"`
	Rate Rate   `yaml:"rate"`
	// Delay is one-way. RTT, when set, replaces it with RTT/2.
	Delay Duration `yaml:"delay,omitempty"`
	RTT   Duration `yaml:"rtt,omitempty"`
	// Trace, instead of Rate, drives the link's rate with a
	// packet-delivery trace in Mahimahi's format: a built-in name
	// (cellular-lte) or a file (link/trace, docs/link.md).
	Trace string `yaml:"trace,omitempty"`
}

// ScaleSpec overrides the scale-dependent fields. Zero fields keep the
// value of the spec.
type ScaleSpec struct {
	Messages    int `yaml:"messages,omitempty"`
	Repetitions int `yaml:"repetitions,omitempty"`
	// Intervals is refused by Validate: a scale never changes the
	// inter-arrival time. It is parsed only to say so clearly.
	Intervals []Duration `yaml:"intervals,omitempty"`
}

// oneWay is the link's one-way delay per direction.
func (l LinkSpec) oneWay() time.Duration {
	if l.RTT > 0 {
		return l.RTT.D() / 2
	}
	return l.Delay.D()
}

// ProfileNames lists the built-in link profiles (package link/profile).
func ProfileNames() []string {
	n := profile.Names()
	sort.Strings(n)
	return n
}

// linkOf resolves a profile name to its link: one representation, the
// one-way delay of each direction, from here to the emulator. A built-in
// profile's delay figure is read under the spec's delay convention
// (link.Profile's OneWay or RTT); a definition under profile_defs says
// itself whether it gives the one-way delay or the round trip.
func (s *Spec) linkOf(name string) (LinkParams, bool) {
	if d, ok := s.ProfileDefs[name]; ok {
		return LinkParams{Name: name, RateBps: int64(d.Rate), DelayNs: int64(d.oneWay()), Trace: d.Trace}, true
	}
	p, err := link.ProfileByName(name)
	if err != nil || p.Name != name {
		return LinkParams{}, false
	}
	prm := p.OneWay()
	if s.delayConvention() == DelayRTT {
		prm = p.RTT()
	}
	return LinkParams{Name: name, RateBps: prm.Rate, DelayNs: int64(prm.Delay)}, true
}

func (s *Spec) delayConvention() string {
	if s.Delay == "" {
		return DelayOneWay
	}
	return s.Delay
}

// Resolved returns the spec as a run uses it: every zero field set to its
// default (seed 1, TCP congestion control cubic, grace 3 s, ...), so `lab
// show` prints the values a run will use.
func (s Spec) Resolved() Spec { return s.withDefaults() }

// withDefaults returns a copy with every zero field set to its default.
func (s Spec) withDefaults() Spec {
	if s.Topology.Kind == "" {
		s.Topology.Kind = KindPubBrokerSub
	}
	if s.Topology.Kind == KindPubBrokerSub && s.Topology.Impaired == "" {
		s.Topology.Impaired = ImpairedPublisher
	}
	if len(s.Topology.Directions) == 0 {
		s.Topology.Directions = []string{DirectionBoth}
	}
	if s.Topology.Kind == KindSharedMedium {
		if len(s.Topology.Publishers) == 0 {
			s.Topology.Publishers = []int{3}
		}
		if len(s.Topology.Retries) == 0 {
			s.Topology.Retries = []int{0}
		}
	}
	if len(s.Profiles) == 0 {
		s.Profiles = []string{"wifi"}
	}
	if s.Delay == "" {
		s.Delay = DelayOneWay
	}
	if len(s.Losses) == 0 {
		s.Losses = []Percent{0}
	}
	if len(s.LossBursts) == 0 {
		s.LossBursts = []float64{0}
	}
	if len(s.Transports) == 0 {
		s.Transports = []string{TransportTLS, TransportQUIC}
	}
	if len(s.QoS) == 0 {
		s.QoS = []int{0}
	}
	if len(s.PayloadSizes) == 0 {
		s.PayloadSizes = []int{100}
	}
	if len(s.Patterns) == 0 {
		s.Patterns = []string{PatternPeriodic}
	}
	if len(s.Intervals) == 0 {
		s.Intervals = []Duration{Duration(time.Second)}
	}
	if len(s.QUIC0RTT) == 0 {
		s.QUIC0RTT = []records.EarlyPolicy{records.EarlyHold}
	}
	if len(s.QUICStreamStrategies) == 0 {
		s.QUICStreamStrategies = []string{transport.StrategyControl}
	}
	if len(s.QUICDatagrams) == 0 {
		s.QUICDatagrams = []bool{false}
	}
	if slices.Contains(s.Patterns, PatternMultiTopic) {
		// only there, so that lab show prints them for E9 alone
		if s.Topics == 0 {
			s.Topics = defaultTopics
		}
		if len(s.LargeMessages) == 0 {
			s.LargeMessages = []LargeMessage{{}}
		}
	}
	if s.Messages == 0 {
		s.Messages = 100
	}
	if s.Repetitions == 0 {
		s.Repetitions = 1
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.TCPCongestion == "" {
		s.TCPCongestion = "cubic"
	}
	if s.Grace == 0 {
		s.Grace = Duration(3 * time.Second)
	}
	s.Energy = s.Energy.withDefaults()
	return s.pathChangeDefaults() // lab/e10spec.go
}

// MinPayloadSize is the smallest payload that holds the measurement header.
const MinPayloadSize = 16

var experimentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Validate reports every problem of the spec at once, each prefixed with
// the field path ("losses[2]: ..."). It validates the spec with defaults
// applied, so an empty list is never an error.
func (s Spec) Validate() error {
	d := s.withDefaults()
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if s.Experiment == "" {
		bad("experiment", "missing: name the experiment, for example E1")
	} else if !experimentName.MatchString(s.Experiment) {
		bad("experiment", "%q: use letters, digits, '-', '_' and '.' only (it names directories)", s.Experiment)
	}
	switch d.Topology.Kind {
	case KindPubBrokerSub:
		switch d.Topology.Impaired {
		case ImpairedPublisher, ImpairedBoth:
		default:
			bad("topology.impaired", "%q: want publisher or both", d.Topology.Impaired)
		}
		if len(s.Topology.Publishers) > 0 {
			bad("topology.publishers", "only for kind shared-medium")
		}
		if len(s.Topology.Retries) > 0 {
			bad("topology.retries", "only for kind shared-medium")
		}
		seenDir := map[string]bool{}
		for i, d := range s.Topology.Directions {
			switch d {
			case DirectionBoth, DirectionEgress, DirectionIngress:
			default:
				bad(fmt.Sprintf("topology.directions[%d]", i), "%q: want egress (the publisher's outgoing packets only), ingress or both", d)
			}
			if seenDir[d] {
				bad(fmt.Sprintf("topology.directions[%d]", i), "%q twice", d)
			}
			seenDir[d] = true
		}
	case KindSharedMedium:
		if s.Topology.Impaired != "" {
			bad("topology.impaired", "only for kind pub-broker-sub")
		}
		if len(s.Topology.Directions) > 0 && !slices.Equal(s.Topology.Directions, []string{DirectionBoth}) {
			bad("topology.directions", "a shared medium is impaired in both directions")
		}
		for i, n := range d.Topology.Publishers {
			if n < 1 || n > 64 {
				bad(fmt.Sprintf("topology.publishers[%d]", i), "%d: want 1 to 64 publishers", n)
			}
		}
		for i, r := range d.Topology.Retries {
			if r < 0 || r > 15 {
				bad(fmt.Sprintf("topology.retries[%d]", i), "%d: want 0 to 15 link-layer retries", r)
			}
		}
	default:
		bad("topology.kind", "%q: want pub-broker-sub or shared-medium", d.Topology.Kind)
	}
	if d.Topology.QueueBytes < 0 {
		bad("topology.queue_bytes", "%d: must not be negative (0 means one bandwidth-delay product)", d.Topology.QueueBytes)
	}
	seenSub := map[string]bool{}
	for i, l := range d.Topology.SubLinks {
		p := fmt.Sprintf("topology.sub_links[%d]", i)
		if l.Name == "" {
			bad(p+".name", "missing: name the link (it appears in cell ids)")
		} else if !experimentName.MatchString(l.Name) {
			bad(p+".name", "%q: use letters, digits, '-', '_' and '.' only", l.Name)
		} else if seenSub[l.Name] {
			bad(p+".name", "%q used twice", l.Name)
		}
		seenSub[l.Name] = true
		if l.Delay > 0 && l.RTT > 0 {
			bad(p, "give delay (one-way) or rtt, not both")
		}
	}
	for name, l := range d.ProfileDefs {
		if l.Delay > 0 && l.RTT > 0 {
			bad("profile_defs."+name, "give delay (one-way) or rtt, not both")
		}
		checkTrace("profile_defs."+name, l, bad)
		if l.Trace != "" && d.Topology.Kind == KindSharedMedium {
			bad("profile_defs."+name+".trace", "a shared medium has a capacity, not a trace; use pub-broker-sub")
		}
	}
	for i, l := range d.Topology.SubLinks {
		checkTrace(fmt.Sprintf("topology.sub_links[%d]", i), l, bad)
	}
	seenBurst := map[float64]bool{}
	for i, b := range d.LossBursts {
		p := fmt.Sprintf("loss_bursts[%d]", i)
		switch {
		case seenBurst[b]:
			bad(p, "%v listed twice", b)
		case b != 0 && !(b >= 1):
			bad(p, "%v: want a mean burst length of at least 1 packet, or 0 for independent loss", b)
		case b != 0 && d.Topology.Kind == KindSharedMedium:
			bad(p, "a shared medium has a frame error rate per try, not bursts; leave loss_bursts out")
		case b != 0:
			for _, l := range d.Losses {
				if _, err := link.GEBursts(float64(l)/100, b); err != nil {
					bad(p, "with loss %s%%: %v", l, err)
				}
			}
		}
		seenBurst[b] = true
	}
	for i, name := range d.Profiles {
		if _, ok := d.linkOf(name); !ok {
			bad(fmt.Sprintf("profiles[%d]", i), "unknown profile %q: want one of %s, or define it under profile_defs", name, strings.Join(ProfileNames(), ", "))
		}
	}
	dupCheck(d.Profiles, "profiles", bad)
	switch d.Delay {
	case DelayOneWay, DelayRTT:
	default:
		bad("delay", "%q: want one-way or rtt", d.Delay)
	}
	seenLoss := map[Percent]bool{}
	for i, l := range d.Losses {
		if seenLoss[l] {
			bad(fmt.Sprintf("losses[%d]", i), "%s%% listed twice", l)
		}
		seenLoss[l] = true
		if l < 0 || l >= 100 {
			bad(fmt.Sprintf("losses[%d]", i), "%s%%: want a loss from 0 up to (not including) 100 percent", l)
		}
	}
	for i, t := range d.Transports {
		switch ProtocolOf(t) {
		case "":
			bad(fmt.Sprintf("transports[%d]", i), "%q: want a broker URL scheme: %s", t, strings.Join(LabTransports(), ", "))
		case records.ProtocolAMQP:
			for _, q := range d.QoS {
				if q > 1 {
					bad(fmt.Sprintf("transports[%d]", i), "%s with QoS %d: AMQP has at-most-once (0) and at-least-once (1) only", t, q)
					break
				}
			}
			if slices.Contains(d.Patterns, PatternReconnect) || slices.Contains(d.Patterns, PatternReconnectEarly) {
				bad(fmt.Sprintf("transports[%d]", i), "%s with pattern reconnect: its subscriber needs a wildcard, which AMQP addresses have not; use batch-resume", t)
			}
			if d.Topology.Kind == KindSharedMedium {
				bad(fmt.Sprintf("transports[%d]", i), "%s on a shared medium is not built (pub-broker-sub only)", t)
			}
		case records.ProtocolCoAP:
			for _, q := range d.QoS {
				if q > 1 {
					bad(fmt.Sprintf("transports[%d]", i), "%s with QoS %d: CoAP has non-confirmable (0) and confirmable (1) messages only", t, q)
					break
				}
			}
			if slices.Contains(d.Patterns, PatternBatchEcho) {
				bad(fmt.Sprintf("transports[%d]", i), "%s with pattern batch-echo is not built (the echo would be observed over CoAP)", t)
			}
			if slices.Contains(d.Patterns, PatternReconnectEarly) {
				bad(fmt.Sprintf("transports[%d]", i), "%s with pattern reconnect-early: CoAP sends nothing behind a connect; use reconnect", t)
			}
			if !slices.Contains(labTransports()[endpoint.ProtocolCoAP], endpoint.Scheme(t)) {
				bad(fmt.Sprintf("transports[%d]", i), "%q: the lab has no broker for it yet; want one of %s", t, strings.Join(LabTransports(), ", "))
			}
		default:
			if !slices.Contains(labTransports()[endpoint.Protocol(ProtocolOf(t))], endpoint.Scheme(t)) {
				bad(fmt.Sprintf("transports[%d]", i), "%q: the lab has no broker for it yet; want one of %s", t, strings.Join(LabTransports(), ", "))
			}
		}
	}
	dupCheck(d.Transports, "transports", bad)
	for i, q := range d.QoS {
		if q < 0 || q > 2 {
			bad(fmt.Sprintf("qos[%d]", i), "%d: want 0, 1 or 2", q)
		}
	}
	for i, n := range d.PayloadSizes {
		if n < MinPayloadSize || n > 1<<20 {
			bad(fmt.Sprintf("payload_sizes[%d]", i), "%d: want %d bytes (the measurement header) to 1 MiB", n, MinPayloadSize)
		}
	}
	for i, p := range d.Patterns {
		tp, ok := patternByName(p)
		switch {
		case !ok:
			bad(fmt.Sprintf("patterns[%d]", i), "%q: want %s", p, patternNames())
		case tp.check != nil:
			tp.check(d, i, bad)
		}
	}
	dupCheck(d.Patterns, "patterns", bad)
	if d.Reconnect {
		for i, p := range d.Patterns {
			if p != PatternPeriodic {
				bad(fmt.Sprintf("patterns[%d]", i), "%s with reconnect: true: only the periodic pattern's publishers reconnect (path-change always does); leave reconnect out", p)
			}
		}
		for i, t := range d.Transports {
			if ProtocolOf(t) != records.ProtocolMQTT {
				bad(fmt.Sprintf("transports[%d]", i), "%s with reconnect: true: the reconnecting publisher (iotq pub --reconnect) is MQTT's; use mqtts, quic, mqtt, ws or wss", t)
			}
		}
	}
	for i, p := range d.QUIC0RTT {
		switch p {
		case records.EarlyAccept, records.EarlyHold, records.EarlyRefuse:
		default:
			bad(fmt.Sprintf("quic_0rtt[%d]", i), "%q: want accept, hold or refuse (the broker's QUIC 0-RTT policy, docs/0rtt.md)", p)
		}
	}
	dupCheck(d.QUIC0RTT, "quic_0rtt", bad)
	for i, st := range d.QUICStreamStrategies {
		switch st {
		case transport.StrategyControl, transport.StrategyPerTopic, transport.StrategyPerPublish:
		default:
			bad(fmt.Sprintf("quic_stream_strategies[%d]", i), "%q: want control, per-topic or per-publish (the clients' QUIC stream strategy, docs/mqtt-quic.md)", st)
		}
	}
	dupCheck(d.QUICStreamStrategies, "quic_stream_strategies", bad)
	if slices.Contains(d.Patterns, PatternFailover) && (!slices.Equal(d.QUICStreamStrategies, []string{transport.StrategyControl}) || slices.Contains(d.QUICDatagrams, true)) {
		// E11's runner builds its own client command lines
		bad("quic_stream_strategies", "the failover pattern (E11) runs its clients with the default stream strategy only; leave quic_stream_strategies and quic_datagrams out")
	}
	seenDgram := map[bool]bool{}
	for i, dg := range d.QUICDatagrams {
		p := fmt.Sprintf("quic_datagrams[%d]", i)
		if seenDgram[dg] {
			bad(p, "%v listed twice", dg)
		}
		seenDgram[dg] = true
		if !dg || onlyMultiTopic(d) {
			// multi-topic (E9): datagram cells are made at QoS 0 only
			continue
		}
		for _, q := range d.QoS {
			if q != 0 {
				bad(p, "true with QoS %d: only QoS 0 messages go as QUIC datagrams (a QoS %d message stays on a stream, so the cell would measure nothing new); set qos: [0] or give this sweep its own experiment", q, q)
				break
			}
		}
	}
	validateMultiTopic(d, s, bad) // lab/e9.go
	for i, iv := range d.Intervals {
		if iv <= 0 {
			bad(fmt.Sprintf("intervals[%d]", i), "must be positive, for example 1s or 10ms")
		}
	}
	if s.Messages < 0 || s.Messages > 10_000_000 {
		bad("messages", "%d: want 1 to 10000000", s.Messages)
	}
	if s.Repetitions < 0 || s.Repetitions > 100_000 {
		bad("repetitions", "%d: want 1 to 100000", s.Repetitions)
	}
	switch d.TCPCongestion {
	case "cubic", "reno", "bbr":
	default:
		bad("tcp_congestion", "%q: want cubic, reno or bbr", d.TCPCongestion)
	}
	for name, sc := range s.Scales {
		p := "scales." + name
		switch name {
		case ScaleSmoke, ScaleReduced, ScaleFull:
		default:
			bad(p, "unknown scale: want smoke, reduced or full")
		}
		if sc.Messages < 0 {
			bad(p+".messages", "%d: must not be negative", sc.Messages)
		}
		if sc.Repetitions < 0 {
			bad(p+".repetitions", "%d: must not be negative", sc.Repetitions)
		}
		if len(sc.Intervals) > 0 {
			bad(p+".intervals", "a scale must not change the inter-arrival time (it decides how many messages are in flight); cut messages or repetitions instead")
		}
	}
	s.validatePathChange(d, bad) // lab/e10spec.go
	errs = append(errs, d.Energy.validate()...)
	return errors.Join(errs...)
}

// checkTrace reports a link's trace that cannot be used: unknown, or a
// file that does not parse (its error names the line), or beside a rate.
func checkTrace(path string, l LinkSpec, bad func(string, string, ...any)) {
	if l.Trace == "" {
		return
	}
	if _, err := trace.Resolve(l.Trace); err != nil {
		bad(path+".trace", "%v", err)
	}
	if l.Rate > 0 {
		bad(path+".rate", "the trace %s sets the rate; leave rate out", l.Trace)
	}
}

func dupCheck[S ~string](list []S, path string, bad func(string, string, ...any)) {
	seen := map[S]bool{}
	for i, v := range list {
		if seen[v] {
			bad(fmt.Sprintf("%s[%d]", path, i), "%q listed twice", v)
		}
		seen[v] = true
	}
}

// FieldError is one problem of a spec, at a field path ("losses[2]");
// ParseSpecs places it at its line in the file. It is the configuration
// files' type (internal/yamlconf), so a scenario's errors read as the
// broker's do.
type FieldError = yamlconf.FieldError

// Scaled returns the spec at the given scale: only Messages and
// Repetitions change, never the inter-arrival time, payload, loss or link
// parameters. "full" (or "") is the spec itself. A scale the spec does not
// define follows the generic rule: smoke caps messages at 20 and
// repetitions at 1; reduced caps messages at 100 and repetitions at 5.
func (s Spec) Scaled(scale string) (Spec, error) {
	switch scale {
	case "", ScaleFull:
		return s, nil
	case ScaleSmoke, ScaleReduced:
	default:
		return s, fmt.Errorf("scale %q: want smoke, reduced or full", scale)
	}
	// A scale cuts counts only: the inter-arrival time, payload, loss and
	// links set the physics being measured (how many messages are in
	// flight on a long link), so they stay as written.
	d := s.withDefaults()
	out := s
	out.Messages, out.Repetitions = d.Messages, d.Repetitions
	if sc, ok := s.Scales[scale]; ok {
		if sc.Messages > 0 {
			out.Messages = sc.Messages
		}
		if sc.Repetitions > 0 {
			out.Repetitions = sc.Repetitions
		}
		return out, nil
	}
	maxMsg, maxRep := 20, 1
	if scale == ScaleReduced {
		maxMsg, maxRep = 100, 5
	}
	out.Messages = min(out.Messages, maxMsg)
	out.Repetitions = min(out.Repetitions, maxRep)
	return out, nil
}

// ParseSpecs reads a scenario: one Spec per YAML document. name labels
// the errors (usually the file name). Problems are reported as the
// broker's configuration errors are (internal/yamlconf), all at once,
// each as "NAME:LINE: FIELD: problem" with what to write: unknown fields,
// values of the wrong type, syntax errors and Validate's problems.
func ParseSpecs(name string, data []byte) ([]Spec, error) {
	specs, err := parseSpecs(name, data)
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: no experiment in the file: write at least `experiment: NAME`", name)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Experiment] {
			return nil, fmt.Errorf("%s: experiment %q appears twice: give each document its own name", name, s.Experiment)
		}
		seen[s.Experiment] = true
	}
	return specs, nil
}

// LoadSpecs reads a scenario file.
func LoadSpecs(path string) ([]Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return ParseSpecs(path, data)
}

// Marshal writes specs as one YAML stream (documents separated by ---).
func MarshalSpecs(specs []Spec) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, s := range specs {
		if err := enc.Encode(s); err != nil {
			return nil, fmt.Errorf("encode scenario %s: %w", s.Experiment, err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode scenario: %w", err)
	}
	return buf.Bytes(), nil
}
