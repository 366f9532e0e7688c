package link

import (
	"math"
	"math/rand/v2"
	"time"
)

// Cause says why a packet was dropped. CauseNone means it was delivered.
type Cause int

// Drop causes, as counted in DirStats.
const (
	CauseNone    Cause = iota
	CauseRandom        // random loss (Bernoulli or Gilbert-Elliott)
	CauseQueue         // drop-tail queue overflow
	CauseRetries       // shared medium: every link-layer try failed
	CauseDown          // the link was down (schedule)
	CauseMTU           // the packet was larger than the MTU
)

func (c Cause) String() string {
	switch c {
	case CauseNone:
		return "none"
	case CauseRandom:
		return "random"
	case CauseQueue:
		return "queue"
	case CauseRetries:
		return "retries"
	case CauseDown:
		return "down"
	case CauseMTU:
		return "mtu"
	}
	return "unknown"
}

// Verdict is the model's decision for one packet.
type Verdict struct {
	// Depart is when the packet leaves the link at the far end (same clock
	// as the arrival time). Meaningless when Drop != CauseNone.
	Depart time.Duration
	// Wait is the time the packet waited in the queue before its
	// serialization started.
	Wait time.Duration
	// Drop is CauseNone when the packet is delivered.
	Drop Cause
}

// fifo tracks the bytes queued in front of (and in) a serializer: packets
// whose serialization has not ended by now. It needs no packet data: the
// departure time of each packet is fixed on arrival.
type fifo struct {
	ends  []time.Duration // serialization end times, ascending
	sizes []int
	head  int
	bytes int
}

// drain forgets every packet whose serialization ended at or before now.
func (q *fifo) drain(now time.Duration) {
	for q.head < len(q.ends) && q.ends[q.head] <= now {
		q.bytes -= q.sizes[q.head]
		q.head++
	}
	if q.head == len(q.ends) {
		q.ends, q.sizes, q.head = q.ends[:0], q.sizes[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.ends) {
		n := copy(q.ends, q.ends[q.head:])
		copy(q.sizes, q.sizes[q.head:])
		q.ends, q.sizes, q.head = q.ends[:n], q.sizes[:n], 0
	}
}

func (q *fifo) push(end time.Duration, size int) {
	q.ends = append(q.ends, end)
	q.sizes = append(q.sizes, size)
	q.bytes += size
}

// txTime is the serialization time of size bytes at rate bit/s.
func txTime(size int, rate int64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(size) * 8 * 1e9 / float64(rate)))
}

// Dir is the pure model of one link direction: loss decision, drop-tail
// queue limited in bytes, serialization at the rate, propagation delay plus
// jitter. It has no clock of its own: the caller passes the arrival time on
// a monotonic clock, and gets the departure time on the same clock.
//
// Dir is not safe for concurrent use; one goroutine (or a mutex) owns it.
type Dir struct {
	base     Params
	cur      Params // base with the schedule applied so far
	limit    int    // queue limit in bytes (0: unlimited)
	rtt      time.Duration
	rng      *rand.Rand
	start    time.Duration // when the link came up (schedule origin)
	next     int           // next schedule step to apply
	downTill time.Duration // link down until (absolute)
	busy     time.Duration // serializer busy until
	last     time.Duration // last departure (no reordering)
	q        fifo
	geBad    bool
	stats    DirStats
	hist     *histogram
}

// NewDir returns the model of one direction with parameters p, on a link
// whose round trip is rtt (used for the default queue, one BDP). start is
// the arrival-clock time at which the link came up; the schedule counts
// from it. seed makes the random decisions repeatable.
func NewDir(p Params, rtt time.Duration, start time.Duration, seed uint64) *Dir {
	d := &Dir{
		base:  p,
		cur:   p,
		rtt:   rtt,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		start: start,
		hist:  newHistogram(),
	}
	d.limit = p.QueueLimit(rtt)
	d.stats.QueueLimit = d.limit
	return d
}

// applySchedule applies every step due at now.
func (d *Dir) applySchedule(now time.Duration) {
	for d.next < len(d.base.Schedule) {
		s := d.base.Schedule[d.next]
		at := d.start + s.At
		if now < at {
			return
		}
		if s.Down > 0 {
			d.downTill = max(d.downTill, at+s.Down)
		}
		if s.Loss != nil {
			d.cur.Loss = *s.Loss
			d.cur.GilbertElliott = nil
		}
		if s.Delay != nil {
			d.cur.Delay = *s.Delay
		}
		if s.Rate != nil {
			d.cur.Rate = *s.Rate
			d.limit = d.cur.QueueLimit(d.rtt)
			d.stats.QueueLimit = d.limit
		}
		d.next++
	}
}

// lose makes the random loss decision.
func (d *Dir) lose() bool {
	if g := d.cur.GilbertElliott; g != nil {
		var lost bool
		if d.geBad {
			lost = d.rng.Float64() < g.lossBad()
			if d.rng.Float64() < g.R {
				d.geBad = false
			}
		} else {
			lost = g.K > 0 && d.rng.Float64() < g.K
			if d.rng.Float64() < g.P {
				d.geBad = true
			}
		}
		return lost
	}
	return d.cur.Loss > 0 && d.rng.Float64() < d.cur.Loss
}

// jitter draws one jitter sample.
func (d *Dir) jitter() time.Duration {
	return drawJitter(d.rng, d.cur.Jitter, d.cur.JitterDist)
}

func drawJitter(rng *rand.Rand, j time.Duration, dist string) time.Duration {
	if j <= 0 {
		return 0
	}
	switch dist {
	case DistParetoNormal:
		// netem's mix: a quarter pareto, three quarters normal.
		return drawJitter(rng, j/4, DistPareto) + drawJitter(rng, j*3/4, DistNormal)
	case DistUniform:
		return time.Duration((rng.Float64()*2 - 1) * float64(j))
	case DistPareto:
		// Pareto with alpha 3 and scale xm: X-xm has mean xm/2, so xm = 2j.
		const alpha = 3.0
		xm := 2 * float64(j)
		u := 1 - rng.Float64() // (0, 1]
		return time.Duration(xm*math.Pow(u, -1/alpha) - xm)
	default:
		return time.Duration(rng.NormFloat64() * float64(j))
	}
}

// Arrive decides the fate of a packet of size bytes that enters the
// direction at now.
func (d *Dir) Arrive(now time.Duration, size int) Verdict {
	d.applySchedule(now)
	d.stats.Arrived++
	d.stats.ArrivedBytes += uint64(size)
	if now < d.downTill {
		d.stats.DropDown++
		return Verdict{Drop: CauseDown}
	}
	if size > d.cur.mtu() {
		d.stats.DropMTU++
		return Verdict{Drop: CauseMTU}
	}
	if d.lose() {
		d.stats.DropRandom++
		return Verdict{Drop: CauseRandom}
	}
	txEnd := now
	var wait time.Duration
	if d.cur.Rate > 0 {
		d.q.drain(now)
		if d.limit > 0 && d.q.bytes+size > d.limit {
			d.stats.DropQueue++
			return Verdict{Drop: CauseQueue}
		}
		startTx := max(now, d.busy)
		wait = startTx - now
		txEnd = startTx + txTime(size, d.cur.Rate)
		d.busy = txEnd
		d.q.push(txEnd, size)
	}
	dep := txEnd + d.cur.Delay + d.jitter()
	if dep < txEnd {
		dep = txEnd // jitter never makes the delay negative
	}
	if !d.cur.Reorder && dep < d.last {
		dep = d.last
	}
	d.last = max(d.last, dep)
	d.stats.Packets++
	d.stats.Bytes += uint64(size)
	d.hist.record(wait)
	return Verdict{Depart: dep, Wait: wait}
}

// Stats returns a snapshot of the direction's counters.
func (d *Dir) Stats() DirStats {
	s := d.stats
	s.QueueDelay = d.hist.summary()
	return s
}

// Current returns the parameters in force (base plus schedule so far).
func (d *Dir) Current() Params { return d.cur }

// MediumParams describe a shared access medium (a WiFi cell): every frame,
// from any station or from the hub, takes its turn on one channel.
type MediumParams struct {
	// Capacity is the channel's rate in bit/s (required, > 0).
	Capacity int64
	// FrameErrorRate is the probability (0..1) that one try of a frame fails.
	FrameErrorRate float64
	// Retries is the number of link-layer retries after a failed try: a
	// frame is lost only when all Retries+1 tries fail.
	Retries int
	// Slot is the backoff before a try; it doubles with every retry (try i
	// waits Slot * 2^i). Zero means 9 µs (802.11 OFDM slot) times 7.5, the
	// mean initial backoff of CWmin 15.
	Slot time.Duration
	// Delay is the one-way propagation delay between a station and the hub.
	Delay time.Duration
	// Jitter and JitterDist as in Params.
	Jitter     time.Duration
	JitterDist string
	// QueueBytes limits each sender's queue. Zero means one BDP of
	// Capacity over the round trip (2*Delay), at least MinQueueBytes.
	QueueBytes int
	// MTU as in Params (zero means 1500).
	MTU int
}

// DefaultSlot is the backoff slot of MediumParams when Slot is zero.
const DefaultSlot = 67500 * time.Nanosecond

func (m MediumParams) slot() time.Duration {
	if m.Slot == 0 {
		return DefaultSlot
	}
	return m.Slot
}

func (m MediumParams) queueLimit() int {
	if m.QueueBytes > 0 {
		return m.QueueBytes
	}
	return Params{Rate: m.Capacity}.QueueLimit(2 * m.Delay)
}

// Validate reports every problem of m, prefixed with path.
func (m MediumParams) Validate(path string) error {
	p := Params{Delay: m.Delay, Jitter: m.Jitter, JitterDist: m.JitterDist, Loss: m.FrameErrorRate,
		Rate: m.Capacity, QueueBytes: m.QueueBytes, MTU: m.MTU}
	var errs []error
	if err := p.Validate(path); err != nil {
		errs = append(errs, err)
	}
	if m.Capacity <= 0 {
		errs = append(errs, errorf("%s: capacity must be a positive rate such as 20mbit", path))
	}
	if m.Retries < 0 || m.Retries > 30 {
		errs = append(errs, errorf("%s: retries %d is outside 0..30", path, m.Retries))
	}
	if m.Slot < 0 {
		errs = append(errs, errorf("%s: slot %v is negative", path, m.Slot))
	}
	return joinErrors(errs)
}

// MediumModel is the pure model of a shared medium with n senders (index 0 is
// the hub, 1..n-1 the stations). All senders share one serializer
// timeline; each sender has its own drop-tail queue. Not safe for
// concurrent use.
type MediumModel struct {
	p     MediumParams
	rng   *rand.Rand
	limit int
	busy  time.Duration
	q     []fifo
	last  []time.Duration // per (sender, receiver) pair: no reordering
	n     int
	stats []DirStats // indexed sender*n + receiver
	hist  []*histogram
}

// NewMediumModel returns a medium model for n senders (the hub included).
func NewMediumModel(p MediumParams, n int, seed uint64) *MediumModel {
	m := &MediumModel{
		p:     p,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		limit: p.queueLimit(),
		q:     make([]fifo, n),
		last:  make([]time.Duration, n*n),
		n:     n,
		stats: make([]DirStats, n*n),
		hist:  make([]*histogram, n*n),
	}
	for i := range m.hist {
		m.hist[i] = newHistogram()
		m.stats[i].QueueLimit = m.limit
	}
	return m
}

// Arrive decides the fate of a frame of size bytes that sender from hands
// to the medium at now, addressed to receiver to.
func (m *MediumModel) Arrive(now time.Duration, from, to, size int) Verdict {
	k := from*m.n + to
	st := &m.stats[k]
	st.Arrived++
	st.ArrivedBytes += uint64(size)
	mtu := m.p.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if size > mtu {
		st.DropMTU++
		return Verdict{Drop: CauseMTU}
	}
	q := &m.q[from]
	q.drain(now)
	if q.bytes+size > m.limit {
		st.DropQueue++
		return Verdict{Drop: CauseQueue}
	}
	startTx := max(now, m.busy)
	wait := startTx - now
	air := txTime(size, m.p.Capacity)
	t := startTx
	ok := false
	slot := m.p.slot()
	for try := 0; try <= m.p.Retries; try++ {
		t += slot<<try + air
		st.Tries++
		if m.p.FrameErrorRate <= 0 || m.rng.Float64() >= m.p.FrameErrorRate {
			ok = true
			break
		}
	}
	m.busy = t
	q.push(t, size)
	if !ok {
		st.DropRetries++
		return Verdict{Drop: CauseRetries}
	}
	dep := t + m.p.Delay + drawJitter(m.rng, m.p.Jitter, m.p.JitterDist)
	if dep < t {
		dep = t
	}
	if dep < m.last[k] {
		dep = m.last[k]
	}
	m.last[k] = dep
	st.Packets++
	st.Bytes += uint64(size)
	m.hist[k].record(wait)
	return Verdict{Depart: dep, Wait: wait}
}

// Stats returns the counters of frames from sender from to receiver to.
func (m *MediumModel) Stats(from, to int) DirStats {
	k := from*m.n + to
	s := m.stats[k]
	s.QueueDelay = m.hist[k].summary()
	return s
}
