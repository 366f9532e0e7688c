package link

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/iotq/iotq/link/profile"
	"github.com/iotq/iotq/link/trace"
)

// Params describe one direction of a link: what happens to a packet that
// enters it. The zero value is a perfect link: no delay, no loss, unlimited
// rate, MTU 1500.
type Params struct {
	// Delay is the one-way propagation delay of this direction.
	Delay time.Duration
	// Jitter is the spread added to Delay, drawn per packet from JitterDist.
	// Zero means no jitter.
	Jitter time.Duration
	// JitterDist names the jitter distribution: "normal" (the default when
	// empty; standard deviation Jitter), "uniform" (uniform in
	// [-Jitter, +Jitter]), "pareto" (one-sided, heavy tailed, mean Jitter)
	// or "paretonormal" (a quarter pareto, three quarters normal, as netem).
	// The total delay is never negative.
	JitterDist string
	// Loss is the probability (0..1) that a packet is dropped at random
	// (Bernoulli). Ignored when GilbertElliott is set.
	Loss float64
	// GilbertElliott, when set, replaces Loss by a two-state loss model.
	GilbertElliott *GE
	// Rate is the serialization rate in bit/s. Zero means unlimited (no
	// serialization delay and no queue). Ignored when Trace is set.
	Rate int64
	// Trace, when set, replaces Rate by a packet-delivery trace in
	// Mahimahi's format (package link/trace): the queue is served only at
	// the trace's delivery opportunities, each of which carries up to MTU
	// bytes (a packet larger than what is left of one continues at the
	// next; bytes of an opportunity that finds the queue empty are lost).
	// The trace starts when the link comes up and repeats. Delay is added
	// after the delivery, as Mahimahi's delay shell after its link shell.
	Trace *trace.Trace
	// QueueBytes limits the drop-tail queue in front of the serializer, in
	// bytes. Zero means one bandwidth-delay product (Rate times the round
	// trip of the link), at least MinQueueBytes. Only used when Rate > 0.
	QueueBytes int
	// Queue picks the queue discipline and its limits (queue.go); the zero
	// value is drop-tail limited by QueueBytes.
	Queue QueueSpec
	// MTU of the link's interfaces. Zero means 1500.
	MTU int
	// Reorder allows jitter to reorder packets. When false (the default) a
	// packet never leaves before the packet that entered before it.
	Reorder bool
	// Schedule lists changes applied while the link runs, in order of At.
	Schedule []Step
	// NAT puts the rebinding NAT of Step.Rebind in front of the
	// direction's sending end from the start even when no step of
	// Schedule rebinds, so that Network.Change can rebind it at a moment
	// the caller picks (the lab's E10 changes the path a fixed time into
	// each repetition). Until a rebind it translates nothing.
	NAT bool
}

// GE are the parameters of the Gilbert-Elliott loss model, in the order and
// with the meaning of netem's "loss gemodel p r 1-h 1-k".
type GE struct {
	// P is the probability of moving from the good to the bad state (per packet).
	P float64
	// R is the probability of moving from the bad to the good state (per packet).
	R float64
	// H is netem's 1-h: the loss probability in the bad state. Zero means 1.
	H float64
	// K is netem's 1-k: the loss probability in the good state. Zero means 0.
	K float64
}

// lossBad returns the loss probability in the bad state (H, default 1).
func (g GE) lossBad() float64 {
	if g.H == 0 {
		return 1
	}
	return g.H
}

// MeanLoss is the stationary loss rate of the model.
func (g GE) MeanLoss() float64 {
	if g.P+g.R == 0 {
		return g.K
	}
	pb := g.P / (g.P + g.R)
	return pb*g.lossBad() + (1-pb)*g.K
}

// GEBursts returns the Gilbert-Elliott model whose mean loss is mean
// (0..1) and whose loss bursts are burst packets long on average: every
// packet is lost in the bad state and none in the good one, so a burst is
// one stay in the bad state (geometric, mean 1/R) and the mean loss is
// P/(P+R).
func GEBursts(mean, burst float64) (GE, error) {
	if !(mean >= 0 && mean < 1) {
		return GE{}, fmt.Errorf("mean loss %v: want 0 up to (not including) 100 %%", mean)
	}
	if !(burst >= 1) {
		return GE{}, fmt.Errorf("mean burst length %v packets: want at least 1", burst)
	}
	r := 1 / burst
	p := mean * r / (1 - mean)
	if p > 1 {
		return GE{}, fmt.Errorf("mean loss %v with bursts of %v packets needs p = %v > 1: use longer bursts", mean, burst, p)
	}
	return GE{P: p, R: r, H: 1}, nil
}

// Step is one scheduled change of a link direction. At is measured from the
// moment the link came up (for Up: when the whole network is built, just
// before Up returns). A step with Down > 0 takes the link down from At
// for Down (every packet that arrives meanwhile is dropped with cause
// "down"). Non-nil Loss, Delay or Rate replace the current value from At on.
//
// Rebind models a NAT in front of the direction's sending end (A for
// A->B) whose mappings change at At, as when a mapping times out and the
// next packet gets a new external port: from At on, every TCP and UDP
// flow leaving A gets a new source port (from 40000 up) on its next
// packet, packets coming back to the new port are translated to the
// flow's own port, and packets to a port of an earlier mapping (before the
// first Rebind: the flow's own port) are dropped with cause "nat".
// Several Rebind steps make several epochs. Other packets pass untouched.
// TCP connections die (the peer answers the unknown 4-tuple with a reset);
// QUIC connections survive by migrating to the new path.
type Step struct {
	At     time.Duration
	Down   time.Duration
	Loss   *float64
	Delay  *time.Duration
	Rate   *int64
	Rebind bool
}

// MinQueueBytes is the smallest default queue: a bandwidth-delay product
// below it (fast links with little delay) is raised to it.
const MinQueueBytes = 64 * 1500

// DefaultMTU is the MTU used when Params.MTU is zero.
const DefaultMTU = 1500

// jitter distribution names.
const (
	DistNormal  = "normal"
	DistUniform = "uniform"
	DistPareto  = "pareto"
	// DistParetoNormal mixes a quarter pareto and three quarters normal.
	DistParetoNormal = "paretonormal"
)

// Validate reports every problem of p, prefixed with path (for example
// "links[0].a_to_b").
func (p Params) Validate(path string) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if p.Delay < 0 {
		bad("delay %v is negative; use 0 or a positive duration such as 25ms", p.Delay)
	}
	if p.Jitter < 0 {
		bad("jitter %v is negative; use 0 or a positive duration such as 2ms", p.Jitter)
	}
	switch p.JitterDist {
	case "", DistNormal, DistUniform, DistPareto, DistParetoNormal:
	default:
		bad("jitter distribution %q is unknown; use normal, uniform, pareto or paretonormal", p.JitterDist)
	}
	if !(p.Loss >= 0 && p.Loss <= 1) {
		bad("loss %v is outside 0..1; give a percentage such as 5%%", p.Loss)
	}
	if g := p.GilbertElliott; g != nil {
		for _, v := range []struct {
			name string
			v    float64
		}{{"p", g.P}, {"r", g.R}, {"1-h", g.H}, {"1-k", g.K}} {
			if !(v.v >= 0 && v.v <= 1) {
				bad("gilbert-elliott %s = %v is outside 0..1", v.name, v.v)
			}
		}
	}
	if p.Rate < 0 {
		bad("rate %d is negative; use 0 (unlimited) or a rate such as 20mbit", p.Rate)
	}
	if p.Trace != nil {
		if err := p.Trace.Validate(); err != nil {
			bad("%v", err)
		}
		if p.Rate > 0 {
			bad("rate %s and trace %s: the trace sets the rate; leave rate out", FormatRate(p.Rate), p.Trace.Name)
		}
	}
	if p.QueueBytes < 0 {
		bad("queue %d bytes is negative; use 0 (one bandwidth-delay product) or a size in bytes", p.QueueBytes)
	}
	if err := p.Queue.Validate(); err != nil {
		bad("%v", err)
	}
	if p.MTU != 0 && (p.MTU < 576 || p.MTU > 65535) {
		bad("mtu %d is outside 576..65535", p.MTU)
	}
	for i, s := range p.Schedule {
		if s.At < 0 || s.Down < 0 {
			bad("schedule[%d]: negative time", i)
		}
		if s.Loss != nil && !(*s.Loss >= 0 && *s.Loss <= 1) {
			bad("schedule[%d]: loss %v is outside 0..1", i, *s.Loss)
		}
		if s.Delay != nil && *s.Delay < 0 {
			bad("schedule[%d]: delay %v is negative", i, *s.Delay)
		}
		if s.Rate != nil && *s.Rate < 0 {
			bad("schedule[%d]: rate %d is negative", i, *s.Rate)
		}
		if s.Rate != nil && p.Trace != nil {
			bad("schedule[%d]: a link driven by a trace takes its rate from the trace; a step cannot change it", i)
		}
		if i > 0 && s.At < p.Schedule[i-1].At {
			bad("schedule[%d]: steps must be in order of time", i)
		}
	}
	return errors.Join(errs...)
}

// rebinds reports whether the direction has a rebinding NAT: NAT, or a
// step of the schedule that rebinds.
func (p Params) rebinds() bool {
	if p.NAT {
		return true
	}
	for _, s := range p.Schedule {
		if s.Rebind {
			return true
		}
	}
	return false
}

// mtu returns the MTU with its default applied.
func (p Params) mtu() int {
	if p.MTU == 0 {
		return DefaultMTU
	}
	return p.MTU
}

// QueueLimit returns the queue limit in bytes for a link whose round trip
// (the sum of both directions' delays) is rtt: QueueBytes if set, else one
// bandwidth-delay product of at least MinQueueBytes (with a trace: at its
// mean rate). Zero when Rate is zero and there is no trace (unlimited rate
// has no queue).
func (p Params) QueueLimit(rtt time.Duration) int {
	rate := p.Rate
	if p.Trace != nil {
		rate = p.Trace.MeanRate(p.mtu())
	}
	if rate == 0 {
		return 0
	}
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	bdp := int(float64(rate) / 8 * rtt.Seconds())
	return max(bdp, MinQueueBytes)
}

// String describes p in the words the CLI and topology files use.
func (p Params) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "delay %v", p.Delay)
	if p.Jitter > 0 {
		d := p.JitterDist
		if d == "" {
			d = DistNormal
		}
		fmt.Fprintf(&b, " jitter %v %s", p.Jitter, d)
	}
	if g := p.GilbertElliott; g != nil {
		fmt.Fprintf(&b, " loss gemodel p=%g r=%g 1-h=%g 1-k=%g", g.P, g.R, g.lossBad(), g.K)
	} else if p.Loss > 0 {
		fmt.Fprintf(&b, " loss %s", FormatLoss(p.Loss))
	}
	if p.Trace != nil {
		fmt.Fprintf(&b, " trace %s (mean %s)", p.Trace.Name, FormatRate(p.Trace.MeanRate(p.mtu())))
		fmt.Fprintf(&b, " queue %s", p.queueString())
	} else if p.Rate > 0 {
		fmt.Fprintf(&b, " rate %s", FormatRate(p.Rate))
		fmt.Fprintf(&b, " queue %s", p.queueString())
	}
	if p.MTU > 0 {
		fmt.Fprintf(&b, " mtu %d", p.MTU)
	}
	if p.Reorder {
		b.WriteString(" reorder")
	}
	if len(p.Schedule) > 0 {
		fmt.Fprintf(&b, " schedule %d steps", len(p.Schedule))
	}
	return b.String()
}

// The units of a link are parsed and formatted by package link/profile,
// which the lab and the report share; these are its functions.

// ParseRate parses a rate as tc writes it ("20mbit"); see profile.ParseRate.
func ParseRate(s string) (int64, error) { return profile.ParseRate(s) }

// FormatRate writes a rate in bit/s in tc's words; see profile.FormatRate.
func FormatRate(bps int64) string { return profile.FormatRate(bps) }

// ParseLoss parses a loss ("5%") into a probability; see profile.ParseLoss.
func ParseLoss(s string) (float64, error) { return profile.ParseLoss(s) }

// FormatLoss writes a probability as a percentage ("5%").
func FormatLoss(p float64) string { return profile.FormatLoss(p) }

// ParseDuration parses a non-negative Go duration; see profile.ParseDuration.
func ParseDuration(what, s string) (time.Duration, error) { return profile.ParseDuration(what, s) }

// Profile is a named link technology from experiments.md (profile.Profile:
// a rate and a delay figure). Whether the figure is one-way or round-trip
// is the scenario's choice, so a Profile is turned into Params explicitly
// with OneWay (E1-E3) or RTT (E4-E6, E8).
type Profile struct{ profile.Profile }

// OneWay returns Params for one direction whose one-way delay is the
// profile's delay figure (a round trip through the link is twice it).
func (p Profile) OneWay() Params { return Params{Delay: p.PerDirection(false), Rate: p.Rate} }

// RTT returns Params for one direction such that the round trip through the
// link (both directions alike) equals the profile's delay figure.
func (p Profile) RTT() Params { return Params{Delay: p.PerDirection(true), Rate: p.Rate} }

// Profiles lists the built-in profiles (wifi, cellular, satellite, ethernet).
func Profiles() []Profile {
	var out []Profile
	for _, p := range profile.All() {
		out = append(out, Profile{p})
	}
	return out
}

// ProfileByName returns the built-in profile called name.
func ProfileByName(name string) (Profile, error) {
	p, err := profile.ByName(name)
	return Profile{p}, err
}

// ParseGE parses Gilbert-Elliott parameters in netem's order, as
// percentages: "p,r[,1-h[,1-k]]", for example "1%,25%" (bursts of 4 on
// average, loss 1-h = 100 % in the bad state, 1-k = 0 % in the good one).
func ParseGE(s string) (GE, error) {
	parts := strings.Split(s, ",")
	if len(parts) < 2 || len(parts) > 4 {
		return GE{}, fmt.Errorf("gilbert-elliott %q: give p,r[,1-h[,1-k]] as percentages, for example 1%%,25%%", s)
	}
	var v [4]float64
	v[2] = 1
	for i, p := range parts {
		x, err := ParseLoss(p)
		if err != nil {
			return GE{}, fmt.Errorf("gilbert-elliott %q: %w", s, err)
		}
		v[i] = x
	}
	return GE{P: v[0], R: v[1], H: v[2], K: v[3]}, nil
}
