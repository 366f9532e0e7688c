package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/iotq/iotq/records"
)

func ms(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }

var (
	e1Profiles = []string{"wifi", "cellular", "satellite"}
	e1Losses   = []Percent{0, 1, 2, 3, 4, 5}
	e4Losses   = []Percent{0, 1, 2, 3, 5, 10}
)

// builtin returns the built-in scenarios by lower-case name. Each is a
// fresh value; callers may modify it.
func builtin() map[string][]Spec {
	smoke := Spec{
		Experiment:   "smoke",
		Description:  "wifi at 0 % and 5 % loss, TCP+TLS vs QUIC, QoS 0 and 1, a few dozen messages per cell",
		Profiles:     []string{"wifi"},
		Delay:        DelayOneWay,
		Losses:       []Percent{0, 5},
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{0, 1},
		PayloadSizes: []int{100},
		Patterns:     []string{PatternPeriodic},
		Intervals:    []Duration{ms(50)},
		Messages:     30,
		Repetitions:  1,
	}
	// smokeResume is the smoke run's pattern B: a publisher reconnects with
	// its session ticket (QUIC 0-RTT, TLS resumption), so the main job's
	// report shows startup latency too.
	smokeResume := Spec{
		Experiment:   "smoke",
		Description:  "wifi at 0 % and 5 % loss, startup latency of a resumed connection (pattern B), TCP+TLS vs QUIC",
		Topology:     TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedBoth},
		Profiles:     []string{"wifi"},
		Delay:        DelayRTT,
		Losses:       []Percent{0, 5},
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{100},
		Patterns:     []string{PatternReconnect},
		Intervals:    []Duration{ms(100)},
		Messages:     1,
		Repetitions:  5,
		Scales: map[string]ScaleSpec{
			ScaleSmoke: {Repetitions: 3},
		},
	}
	// smokeEarly: pattern B whose resumed publisher puts its first QoS 1
	// PUBLISH right behind CONNECT (QUIC: in the 0-RTT flight), under the
	// broker's default 0-RTT policy (hold: processed once the handshake
	// completed) and under accept (processed at once).
	smokeEarly := smokeResume
	smokeEarly.Description = "wifi at 0 % loss, pattern B with the first PUBLISH written with CONNECT (reconnect-early; QUIC: in the 0-RTT flight), broker 0-RTT policy hold and accept"
	smokeEarly.Losses = []Percent{0}
	smokeEarly.Patterns = []string{PatternReconnectEarly}
	smokeEarly.QUIC0RTT = []records.EarlyPolicy{records.EarlyHold, records.EarlyAccept}
	// E1-E3 reproduce a testbed that shaped the publishing device's egress
	// with traffic control: the return path was clean. That is their
	// reference; "-both" variants impair both directions.
	egress := TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, Directions: []string{DirectionEgress}}
	e1 := Spec{
		Experiment:   "E1",
		Description:  "one-way delay vs loss, MQTT over TCP+TLS vs QUIC; publisher link impaired on its egress (publisher to broker) only, broker-subscriber link clean",
		Topology:     egress,
		Profiles:     e1Profiles,
		Delay:        DelayOneWay,
		Losses:       e1Losses,
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{0},
		PayloadSizes: []int{100},
		Patterns:     []string{PatternPeriodic},
		Intervals:    []Duration{ms(1000)},
		Messages:     1000,
		Repetitions:  1,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 10},
			ScaleReduced: {Messages: 100},
		},
	}
	e2 := e1
	e2.Experiment = "E2"
	e2.Description = "MQTT QoS 0, 1 and 2 over QUIC (and TCP+TLS), as E1"
	e2.QoS = []int{0, 1, 2}
	// E1 with bursty loss: the emulator's Gilbert-Elliott model at E1's
	// mean loss rates, loss bursts of 4 packets on average (r = 25 %; p
	// from the mean: link.GEBursts), beside E1's independent loss.
	e1Bursty := e1
	e1Bursty.Experiment = "E1-bursty"
	e1Bursty.Description = "E1 with bursty loss: Gilbert-Elliott at E1's mean loss rates, loss bursts of 4 packets on average; publisher link impaired on its egress only; publishers reconnect when their connection is lost"
	e1Bursty.LossBursts = []float64{4}
	// A burst can swallow TCP's retransmissions one after the other; its
	// backoff then outlasts the MQTT client's wait for PINGRESP and the
	// connection is lost (3 of 15 lossy TCP cells without this): the
	// publisher reconnects, as a device would, and the cell measures that.
	e1Bursty.Reconnect = true
	// E1 on a link whose rate follows a packet-delivery trace: the shipped
	// cellular-lte trace (link/trace: a documented cellular-like model)
	// with the cellular profile's 100 ms one-way delay after it.
	e1Trace := e1
	e1Trace.Experiment = "E1-trace"
	e1Trace.Description = "E1 on a trace-driven cellular link: rate from the cellular-lte packet-delivery trace (Mahimahi format, generated from a documented model), 100 ms one-way delay; publisher link impaired on its egress only"
	e1Trace.Profiles = []string{"cellular-lte"}
	e1Trace.ProfileDefs = map[string]LinkSpec{"cellular-lte": {Trace: "cellular-lte", Delay: ms(100)}}
	e3a := Spec{
		Experiment:   "E3a",
		Description:  "power and CPU of the publisher on a clean link: payload 50/100/500 B, inter-arrival 1/10/20 ms",
		Topology:     egress,
		Profiles:     []string{"clean"},
		ProfileDefs:  map[string]LinkSpec{"clean": {Rate: 0, Delay: 0}},
		Delay:        DelayOneWay,
		Losses:       []Percent{0},
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{0},
		PayloadSizes: []int{50, 100, 500},
		Patterns:     []string{PatternPeriodic},
		Intervals:    []Duration{ms(1), ms(10), ms(20)},
		Messages:     1000,
		Repetitions:  1,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 50},
			ScaleReduced: {Messages: 300},
		},
	}
	e3b := e1
	e3b.Experiment = "E3b"
	e3b.Description = "packets per second and bytes per delivered message at the publisher's interface, profiles and losses of E1, 1 s inter-arrival"
	e4 := Spec{
		Experiment:   "E4",
		Description:  "completion time of 100 stop-and-wait messages (pattern A), both links impaired alike",
		Topology:     TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedBoth},
		Profiles:     e1Profiles,
		Delay:        DelayRTT,
		Losses:       e4Losses,
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{32},
		Patterns:     []string{PatternStopAndWait},
		Intervals:    []Duration{ms(1000)},
		Messages:     100,
		Repetitions:  50,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 10, Repetitions: 1},
			ScaleReduced: {Messages: 50, Repetitions: 5},
		},
	}
	e4b := e4
	e4b.Experiment = "E4b"
	e4b.Description = "E4 with a 10 Gbit/s broker-subscriber link of RTT 1 ms and 100 ms; publisher link as E4"
	e4b.Topology = TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, SubLinks: []LinkSpec{
		{Name: "10g-rtt1ms", Rate: 10_000_000_000, RTT: ms(1)},
		{Name: "10g-rtt100ms", Rate: 10_000_000_000, RTT: ms(100)},
	}}
	e5 := e4
	e5.Experiment = "E5"
	e5.Description = "startup latency of a resumed connection (pattern B: QUIC 0-RTT, TLS session resumption)"
	e5.Patterns = []string{PatternReconnect}
	e5.Messages = 1
	e5.Scales = map[string]ScaleSpec{
		ScaleSmoke:   {Repetitions: 2},
		ScaleReduced: {Repetitions: 10},
	}
	// e5early: E5 whose resumed publisher writes its first PUBLISH with
	// CONNECT (QUIC: in the 0-RTT flight), under the broker's default 0-RTT
	// policy and under the one that processes it at once.
	e5early := e5
	e5early.Description = "reconnect-early: the resumed publisher's first PUBLISH written with CONNECT (QUIC: in the 0-RTT flight), broker 0-RTT policy hold (default: processed once the handshake completed) and accept (processed at once)"
	e5early.Patterns = []string{PatternReconnectEarly}
	e5early.QUIC0RTT = []records.EarlyPolicy{records.EarlyHold, records.EarlyAccept}
	e6 := Spec{
		Experiment:   "E6",
		Description:  "N publishers on a shared wifi medium with link-layer retries; wired broker-subscriber link, RTT 25 ms; patterns A and B",
		Topology:     TopologySpec{Kind: KindSharedMedium, Publishers: []int{3, 5, 8}, Retries: []int{0, 1, 2, 3}, SubLinks: []LinkSpec{{Name: "wired", Rate: 1_000_000_000, RTT: ms(25)}}},
		Profiles:     []string{"wifi"},
		Delay:        DelayRTT,
		Losses:       e4Losses,
		Transports:   []string{TransportTLS, TransportQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{32},
		Patterns:     []string{PatternStopAndWait, PatternReconnect},
		Intervals:    []Duration{ms(100)},
		Messages:     100,
		Repetitions:  50,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 10, Repetitions: 1},
			ScaleReduced: {Messages: 30, Repetitions: 3},
		},
	}
	// E8: AMQP 1.0 over TCP+TLS straight to the broker against AMQP over
	// QUIC through iotq gateway next to it; a batch on a fresh connection
	// per repetition, the variant that resumes, and the variant whose
	// receiver echoes every message back (message round trip).
	e8 := Spec{
		Experiment:   "E8",
		Description:  "AMQP 1.0 over TCP+TLS 1.3 vs over QUIC (iotq gateway next to Artemis): communication time of a 100-message batch, fresh and resumed connections, both links impaired alike",
		Topology:     TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedBoth},
		Profiles:     e1Profiles,
		Delay:        DelayRTT,
		Losses:       []Percent{0, 1, 5, 10, 15},
		Transports:   []string{TransportAMQPS, TransportAMQPQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{100},
		Patterns:     []string{PatternBatch, PatternBatchResume, PatternBatchEcho},
		Intervals:    []Duration{ms(1000)},
		Messages:     100,
		Repetitions:  20,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 20, Repetitions: 1},
			ScaleReduced: {Messages: 100, Repetitions: 3},
		},
	}
	// E7 as the MQTT-vs-CoAP study built it: one WAN emulator on a LAN that
	// every message crosses twice, publisher to broker and broker to
	// subscriber, each direction impaired alike; no delay added. So both
	// links carry the loss (impaired: both) and the profile is a LAN: the
	// ethernet profile's 100 Mbit/s, no delay. The subscriber receives over
	// MQTT (TCP) in every cell, so only the publisher's protocol differs.
	// Closed loop: the next message once the previous one is acknowledged
	// (or, for CoAP, out of retransmissions).
	lan := map[string]LinkSpec{"lan": {Rate: 100_000_000, Delay: 0}}
	e7 := Spec{
		Experiment:   "E7",
		Description:  "MQTT QoS 1 over TCP vs CoAP CON over UDP (and both over QUIC), both legs (publisher-broker, broker-subscriber) lossy in both directions, LAN without added delay, closed loop, 60 B",
		Topology:     TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedBoth, Directions: []string{DirectionBoth}},
		Profiles:     []string{"lan"},
		ProfileDefs:  lan,
		Delay:        DelayOneWay,
		Losses:       []Percent{0, 5, 10, 15, 20, 25},
		Transports:   []string{TransportMQTT, TransportCoAP, TransportQUIC, TransportCoAPQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{60},
		Patterns:     []string{PatternClosedLoop},
		Intervals:    []Duration{ms(1000)},
		Messages:     500,
		Repetitions:  1,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 20},
			ScaleReduced: {Messages: 100},
		},
	}
	e7s := e7
	e7s.Experiment = "E7s"
	e7s.Description = "E7's message-size sweep: 16 B to 2 KiB at 0 % and 10 % loss (bytes on the wire per delivered message, overhead ratio)"
	e7s.Losses = []Percent{0, 10}
	e7s.PayloadSizes = []int{16, 64, 256, 1024, 2048}
	// e7-wifi keeps the set-up E7 had before it was corrected: only the
	// publisher's link lossy (both directions), with the wifi profile's
	// 20 Mbit/s and 25 ms each way, the subscriber behind clean ethernet.
	// Its cell ids are those of the campaigns run with it.
	wifiVariant := func(s Spec) Spec {
		s.Topology = TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, Directions: []string{DirectionBoth}}
		s.Profiles, s.ProfileDefs = []string{"wifi"}, nil
		s.Description = strings.Replace(s.Description, "both legs (publisher-broker, broker-subscriber) lossy in both directions, LAN without added delay", "variant: only the publisher's link lossy (both directions), wifi delay 25 ms each way, clean subscriber link", 1)
		if s.Experiment == "E7s" {
			s.Description += " (variant: only the publisher's wifi link lossy)"
		}
		return s
	}
	e11, e11smoke := e11Specs()
	e9 := e9Spec(egress) // lab/e9.go
	copyE4 := func() Spec { c := e4; return c }
	both := func(s Spec) Spec {
		s.Topology = TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, Directions: []string{DirectionBoth}}
		s.Description = strings.Replace(s.Description, "on its egress (publisher to broker) only", "in both directions", 1) + " (variant: both directions impaired)"
		return s
	}
	return map[string][]Spec{
		"smoke":     {smoke, smokeResume, smokeEarly},
		"e1":        {e1},
		"e1-bursty": {e1Bursty},
		"e1-trace":  {e1Trace},
		"e2":        {e2},
		"e3":        {e3a, e3b},
		"e3a":       {e3a},
		"e3b":       {e3b},
		"e1-both":   {both(e1)},
		"e2-both":   {both(e2)},
		"e3b-both":  {both(e3b)},
		"e4":        {copyE4(), e4b},
		"e4b":       {e4b},
		"e5":        {e5, e5early},
		"e6":        {e6},
		"e7":        {e7, e7s},
		"e7s":       {e7s},
		"e7-wifi":   {wifiVariant(e7), wifiVariant(e7s)},
		"e8":        {e8},
		"e9":        {e9},

		"e10":       {e10Spec()}, // lab/e10spec.go
		"e11":       {e11},       // lab/e11spec.go
		"e11-smoke": {e11smoke},
	}
}

// BuiltinNames lists the built-in scenarios.
func BuiltinNames() []string {
	var n []string
	for k := range builtin() {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Builtin returns a built-in scenario by name (case-insensitive).
func Builtin(name string) ([]Spec, bool) {
	s, ok := builtin()[strings.ToLower(name)]
	return s, ok
}

// Resolve returns the scenario named by arg: a built-in name, or else a
// YAML file path.
func Resolve(arg string) ([]Spec, error) {
	if s, ok := Builtin(arg); ok {
		return s, nil
	}
	if _, err := os.Stat(arg); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q: neither a built-in name (%s) nor an existing YAML file", ErrUnknownScenario, arg, strings.Join(BuiltinNames(), ", "))
	}
	specs, err := LoadSpecs(arg)
	if err != nil {
		return nil, err
	}
	return specs, nil
}
