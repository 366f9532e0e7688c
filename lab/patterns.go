package lab

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// trafficPattern is what the lab knows of one traffic pattern: how a
// repetition runs, what one costs in wall time and what the pattern asks of
// a scenario. patternTable holds every pattern; the runner (runRep), the
// estimate and Validate look patterns up there, so a new pattern is one
// row with its functions (docs/lab.md, "Extending").
type trafficPattern struct {
	name string
	// rep runs one repetition of cr's cell: it starts the processes,
	// waits for them and collects the records.
	rep func(cr *cellRun, ctx context.Context, rep int, repDir, base string) error
	// traffic estimates one repetition's wall time beyond its fixed
	// start (rtt: the path's round trip; lossCost: the timeouts the link's
	// loss costs one message's exchange).
	traffic func(c Cell, rtt, lossCost time.Duration) time.Duration
	// check reports what the pattern refuses in d (i: its index in
	// d.Patterns); nil when the common checks are all it needs.
	check func(d Spec, i int, bad badFunc)
}

// badFunc reports one problem of a scenario at a field path (Validate).
type badFunc = func(path, format string, args ...any)

// patternTable lists the traffic patterns in the order the docs name them.
func patternTable() []trafficPattern {
	batch := func(c Cell, rtt, lossCost time.Duration) time.Duration {
		return 10*rtt + time.Duration(c.Messages)*(2*time.Millisecond+lossCost/4)
	}
	reconnect := func(_ Cell, rtt, lossCost time.Duration) time.Duration { return 2*rtt + 4*lossCost }
	return []trafficPattern{
		{name: PatternPeriodic, rep: (*cellRun).repPeriodic,
			traffic: func(c Cell, _, _ time.Duration) time.Duration { return time.Duration(c.Messages) * c.Interval() }},
		{name: PatternStopAndWait, rep: (*cellRun).repStopAndWait, check: needsAcknowledgedQoS,
			traffic: func(c Cell, rtt, lossCost time.Duration) time.Duration {
				return time.Duration(c.Messages) * (rtt + 2*time.Millisecond + lossCost)
			}},
		{name: PatternReconnect, rep: (*cellRun).repReconnect, traffic: reconnect, check: needsAcknowledgedQoS},
		{name: PatternReconnectEarly, rep: (*cellRun).repReconnect, traffic: reconnect, check: earlyNeedsQoS1},
		{name: PatternBatch, rep: (*cellRun).repBatch, traffic: batch},
		{name: PatternBatchResume, rep: (*cellRun).repBatch, traffic: batch},
		{name: PatternBatchEcho, rep: (*cellRun).repBatch, traffic: batch},
		{name: PatternClosedLoop, rep: (*cellRun).repBatch,
			// a round trip per message, and a retransmission timeout
			// (CoAP's ACK_TIMEOUT, TCP's minimum RTO) for every lost packet
			traffic: func(c Cell, rtt, _ time.Duration) time.Duration {
				return time.Duration(c.Messages) * (rtt + time.Duration(c.PubLink.LossPct*2/100*float64(3*time.Second)))
			}},
		{name: PatternFailover, rep: (*cellRun).repFailover, // E11: lab/e11.go
			traffic: func(c Cell, _, _ time.Duration) time.Duration { return e11Estimate(c) }},
		{name: PatternPathChange, rep: (*cellRun).repPathChange, // E10: lab/e10.go
			traffic: func(c Cell, _, _ time.Duration) time.Duration { return e10Estimate(c) }},
		{name: PatternMultiTopic, rep: (*cellRun).repMultiTopic, // E9: lab/e9.go
			traffic: func(c Cell, _, _ time.Duration) time.Duration {
				return time.Duration(c.Messages)*c.Interval() + multiTopicWait(c)
			}},
	}
}

// patternByName returns the pattern called name.
func patternByName(name string) (trafficPattern, bool) {
	for _, p := range patternTable() {
		if p.name == name {
			return p, true
		}
	}
	return trafficPattern{}, false
}

// patternNames is "a, b, ... or z", for error messages.
func patternNames() string {
	var n []string
	for _, p := range patternTable() {
		n = append(n, p.name)
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// needsAcknowledgedQoS: stop-and-wait and reconnect wait for each
// message's receipt, which a lost QoS 0 message never gives.
func needsAcknowledgedQoS(d Spec, i int, bad badFunc) {
	for _, q := range d.QoS {
		if q == 0 {
			bad(fmt.Sprintf("patterns[%d]", i), "%s needs QoS 1 or 2 (a lost QoS 0 message would stall it); set qos: [1]", d.Patterns[i])
			return
		}
	}
}

// earlyNeedsQoS1: the message written with CONNECT completes on its PUBACK.
func earlyNeedsQoS1(d Spec, i int, bad badFunc) {
	for _, q := range d.QoS {
		if q != 1 {
			bad(fmt.Sprintf("patterns[%d]", i), "%s with QoS %d: the message written with CONNECT is QoS 1 (its receipt is the PUBACK); set qos: [1]", d.Patterns[i], q)
			return
		}
	}
}
