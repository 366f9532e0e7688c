package coapmsg

import (
	"time"
)

// rtoPolicy chooses retransmission timeouts for one endpoint. Calls are
// made with the endpoint's lock held.
type rtoPolicy interface {
	// initial is the first timeout of a new CON message to peer.
	initial(peer string) time.Duration
	// next is the timeout after a retransmission whose previous timeout was
	// cur.
	next(peer string, cur time.Duration) time.Duration
	// acknowledged reports that a CON message to peer was acknowledged rtt
	// after its first transmission, after retransmissions retransmissions.
	acknowledged(peer string, rtt time.Duration, retransmissions int, now time.Time)
}

// rfcPolicy is RFC 7252 section 4.2: initial timeout uniform in
// [ACK_TIMEOUT, ACK_TIMEOUT*ACK_RANDOM_FACTOR], doubled per retransmission.
type rfcPolicy struct {
	p    Params
	rand func() float64
}

func (r rfcPolicy) initial(string) time.Duration {
	return dither(r.p.AckTimeout, r.p.AckRandomFactor, r.rand())
}

func (r rfcPolicy) next(_ string, cur time.Duration) time.Duration { return 2 * cur }

func (r rfcPolicy) acknowledged(string, time.Duration, int, time.Time) {}

// dither returns a duration uniform in [base, base*factor] for u in [0, 1).
func dither(base time.Duration, factor, u float64) time.Duration {
	return base + time.Duration(float64(base)*(factor-1)*u)
}

// CoCoA constants (draft-ietf-core-cocoa-03).
const (
	cocoaInitialRTO = 2 * time.Second
	cocoaMaxRTO     = 60 * time.Second
	cocoaKStrong    = 4
	cocoaKWeak      = 1
	cocoaAlpha      = 0.25  // RTT smoothing gain
	cocoaBeta       = 0.125 // RTTVAR smoothing gain
)

// cocoaPolicy keeps CoCoA's RTO estimators per peer.
type cocoaPolicy struct {
	factor float64 // dithering of the first timeout (ACK_RANDOM_FACTOR)
	rand   func() float64
	peers  map[string]*cocoaPeer
	now    func() time.Time
}

type estimator struct {
	srtt, rttvar time.Duration
	valid        bool
}

// update feeds an RTT sample into e (RFC 6298 smoothing) and returns the
// estimator's RTO with variance factor k.
func (e *estimator) update(rtt time.Duration, k float64) time.Duration {
	if !e.valid {
		e.srtt, e.rttvar, e.valid = rtt, rtt/2, true
	} else {
		d := e.srtt - rtt
		if d < 0 {
			d = -d
		}
		e.rttvar = time.Duration((1-cocoaBeta)*float64(e.rttvar) + cocoaBeta*float64(d))
		e.srtt = time.Duration((1-cocoaAlpha)*float64(e.srtt) + cocoaAlpha*float64(rtt))
	}
	return e.srtt + time.Duration(k*float64(e.rttvar))
}

type cocoaPeer struct {
	strong, weak estimator
	rto          time.Duration // overall RTO
	updated      time.Time     // last update of rto (for aging)
}

func newCocoa(p Params, rand func() float64, now func() time.Time) *cocoaPolicy {
	return &cocoaPolicy{factor: p.AckRandomFactor, rand: rand, peers: map[string]*cocoaPeer{}, now: now}
}

func (c *cocoaPolicy) peer(name string) *cocoaPeer {
	p := c.peers[name]
	if p == nil {
		p = &cocoaPeer{rto: cocoaInitialRTO, updated: c.now()}
		c.peers[name] = p
	}
	return p
}

// age applies CoCoA's aging rules: a small RTO not updated for 16*RTO is
// doubled; a large RTO not updated for 4*RTO moves towards the default.
func (p *cocoaPeer) age(now time.Time) {
	idle := now.Sub(p.updated)
	switch {
	case p.rto < time.Second && idle > 16*p.rto:
		p.rto *= 2
		p.updated = now
	case p.rto > 3*time.Second && idle > 4*p.rto:
		p.rto = (p.rto + cocoaInitialRTO) / 2
		p.updated = now
	}
}

func (c *cocoaPolicy) initial(name string) time.Duration {
	p := c.peer(name)
	p.age(c.now())
	return dither(p.rto, c.factor, c.rand())
}

// next applies the variable back-off factor: 3 below 1 s, 2 up to 3 s, 1.5
// above; capped at 60 s.
func (c *cocoaPolicy) next(_ string, cur time.Duration) time.Duration {
	var f float64
	switch {
	case cur < time.Second:
		f = 3
	case cur <= 3*time.Second:
		f = 2
	default:
		f = 1.5
	}
	return min(time.Duration(f*float64(cur)), cocoaMaxRTO)
}

func (c *cocoaPolicy) acknowledged(name string, rtt time.Duration, retransmissions int, now time.Time) {
	p := c.peer(name)
	switch retransmissions {
	case 0: // strong sample
		rto := p.strong.update(rtt, cocoaKStrong)
		p.rto = (p.rto + rto) / 2
	case 1, 2: // weak sample, measured from the first transmission
		rto := p.weak.update(rtt, cocoaKWeak)
		p.rto = time.Duration(0.25*float64(rto) + 0.75*float64(p.rto))
	default:
		return // ambiguous: no sample
	}
	p.rto = min(p.rto, cocoaMaxRTO)
	p.updated = now
}
