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
	CauseQueue         // the queue dropped it (overflow)
	CauseRetries       // shared medium: every link-layer try failed
	CauseDown          // the link was down (schedule)
	CauseMTU           // the packet was larger than the MTU
	CauseNAT           // a rebinding NAT no longer maps its port (Step.Rebind)
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
	case CauseNAT:
		return "nat"
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

// Event is what a Dir decided about one packet: dropped (Drop says why)
// or delivered at Depart after waiting Wait in the queue. Ref and Size are
// the packet's, as given to Arrive.
type Event struct {
	Ref    any
	Size   int
	Depart time.Duration
	Wait   time.Duration
	Drop   Cause
}

// Dir is the pure model of one link direction, a pipeline of stages: loss
// decision -> queue (a Queue: drop-tail by default, limited in bytes to one
// BDP) -> serialization at the rate -> propagation delay plus jitter. It
// has no clock of its own: the caller passes times on a monotonic clock
// and gets departure times on the same clock.
//
// A packet that finds the serializer busy waits in the queue; Wake says
// when the serializer is free again and Serve, called at (or after) that
// time, hands the next packets to it. Arrive serves what is due first, so
// a late Serve changes no decision, only how late the caller learns it.
// Drop-tail never revisits a packet it accepted, so for it Arrive fixes
// the departure at once and nothing waits for Serve (same decisions, no
// wake-ups).
//
// Dir is not safe for concurrent use; one goroutine (or a mutex) owns it.
type Dir struct {
	base     Params
	cur      Params // base with the schedule applied so far
	rtt      time.Duration
	rng      *rand.Rand
	start    time.Duration // when the link came up (schedule origin)
	next     int           // next schedule step to apply
	downTill time.Duration // link down until (absolute)
	busy     time.Duration // serializer busy until
	serving  int           // size of the packet serialized until busy
	held     fifo          // drop-tail shortcut: packets not serialized by now
	last     time.Duration // last departure (no reordering)
	q        Queue
	limits   QueueLimits
	geBad    bool
	tNext    int  // trace: the opportunity the next packet may use
	tLeft    int  // trace: bytes left in opportunity tNext
	tStarted bool // trace: tLeft was set
	stats    DirStats
	hist     *histogram
	evs      []Event
}

// NewDir returns the model of one direction with parameters p, on a link
// whose round trip is rtt (used for the default queue, one BDP). start is
// the arrival-clock time at which the link came up; the schedule counts
// from it. seed makes the random decisions repeatable. p must be valid
// (Params.Validate); an unknown queue discipline falls back to drop-tail.
func NewDir(p Params, rtt time.Duration, start time.Duration, seed uint64) *Dir {
	d := &Dir{
		base:  p,
		cur:   p,
		rtt:   rtt,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		start: start,
		hist:  newHistogram(),
	}
	d.limits = p.QueueLimits(rtt)
	q, err := NewQueue(p.Queue, d.limits)
	if err != nil {
		q, _ = NewQueue(QueueSpec{}, d.limits)
	}
	d.q = q
	d.stats.QueueLimit = d.limits.Bytes
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
		d.apply(at, s)
		d.next++
	}
}

// Apply applies s at now, whatever its At, as a schedule step due at this
// instant (Network.Change). Rebind is the NAT's, not the model's: it is
// ignored here.
// Packets already accepted keep the departures decided for them.
func (d *Dir) Apply(now time.Duration, s Step) {
	d.applySchedule(now)
	d.apply(now, s)
}

// apply makes step s, due at at, the direction's current parameters.
func (d *Dir) apply(at time.Duration, s Step) {
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
		d.limits = d.cur.QueueLimits(d.rtt)
		if q, ok := d.q.(interface{ SetLimits(QueueLimits) }); ok {
			q.SetLimits(d.limits)
		}
		d.stats.QueueLimit = d.limits.Bytes
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

// Arrive offers a packet of size bytes that enters the direction at now;
// ref comes back in its Event. It returns the events decided by now: the
// packet's own drop or departure if known, drops the queue made to fit it
// in, and departures of earlier packets whose turn came. The slice is
// valid until the next call.
func (d *Dir) Arrive(now time.Duration, size int, ref any) []Event {
	d.evs = d.evs[:0]
	d.serve(now) // what was due before this packet
	d.applySchedule(now)
	d.stats.Arrived++
	d.stats.ArrivedBytes += uint64(size)
	switch {
	case now < d.downTill:
		d.stats.DropDown++
		return append(d.evs, Event{Ref: ref, Size: size, Drop: CauseDown})
	case size > d.cur.mtu():
		d.stats.DropMTU++
		return append(d.evs, Event{Ref: ref, Size: size, Drop: CauseMTU})
	case d.lose():
		d.stats.DropRandom++
		return append(d.evs, Event{Ref: ref, Size: size, Drop: CauseRandom})
	}
	if d.cur.Rate <= 0 && d.cur.Trace == nil && d.q.Len() == 0 {
		d.depart(now, now, Packet{Size: size, Arrival: now, Ref: ref})
		return d.evs
	}
	if d.q.Len() == 0 && d.busy < now {
		d.busy = now // the serializer was idle
	}
	if dt, ok := d.q.(*dropTail); ok && d.q.Len() == 0 {
		d.arriveFinal(now, dt, Packet{Size: size, Arrival: now, Ref: ref})
		return d.evs
	}
	if r, ok := d.q.(interface{ reserve(bytes, packets int) }); ok {
		if d.busy > now {
			r.reserve(d.serving, 1)
		} else {
			r.reserve(0, 0)
		}
	}
	for _, p := range d.q.Enqueue(Packet{Size: size, Arrival: now, Ref: ref}) {
		d.stats.DropQueue++
		d.evs = append(d.evs, Event{Ref: p.Ref, Size: p.Size, Drop: CauseQueue})
	}
	d.serve(now)
	return d.evs
}

// arriveFinal is Arrive's shortcut for drop-tail, which never revisits a
// packet it accepted: the packet's serialization start is known now
// (max(now, busy)), so it is dequeued at once and its departure fixed, with
// no wake-up. What is still waiting or being serialized is tracked in
// d.held and lent to the queue's limits, so every decision is the one the
// event path (and the emulator before the queue stage) makes.
func (d *Dir) arriveFinal(now time.Duration, q *dropTail, p Packet) {
	d.held.drain(now)
	q.reserve(d.held.bytes, len(d.held.ends)-d.held.head)
	if dropped := q.Enqueue(p); len(dropped) > 0 {
		d.stats.DropQueue++
		d.evs = append(d.evs, Event{Ref: p.Ref, Size: p.Size, Drop: CauseQueue})
		return
	}
	start := d.busy // >= now: Arrive moved an idle serializer to now
	p, _ = q.Dequeue(start)
	txEnd := d.txEnd(start, p.Size)
	d.held.push(txEnd, p.Size)
	d.serving = p.Size
	d.depart(start, txEnd, p)
}

// Serve hands to the serializer every waiting packet whose turn came by
// now and returns their events (valid until the next call).
func (d *Dir) Serve(now time.Duration) []Event {
	d.evs = d.evs[:0]
	d.serve(now)
	return d.evs
}

// Wake returns when the next waiting packet's serialization starts, the
// time at which Serve must be called; false when nothing waits.
func (d *Dir) Wake() (time.Duration, bool) {
	if d.q.Len() == 0 {
		return 0, false
	}
	return d.busy, true
}

// serve dequeues at every time the serializer is free, up to now.
func (d *Dir) serve(now time.Duration) {
	for d.q.Len() > 0 && d.busy <= now {
		t := d.busy
		d.applySchedule(t)
		p, ok := d.q.Dequeue(t)
		if !ok {
			return
		}
		d.serving = p.Size
		d.depart(t, d.txEnd(t, p.Size), p)
	}
}

// txEnd is when the serialization of size bytes that starts at start
// ends: at the rate, or with a trace at the delivery opportunity that
// carries its last byte.
func (d *Dir) txEnd(start time.Duration, size int) time.Duration {
	tr := d.cur.Trace
	if tr == nil {
		return start + txTime(size, d.cur.Rate)
	}
	mtu := d.cur.mtu()
	if !d.tStarted {
		d.tLeft, d.tStarted = mtu, true // the first opportunity, untouched
	}
	if d.start+tr.At(d.tNext) < start {
		// the opportunities since then found nothing to send: lost
		d.tNext, d.tLeft = tr.Next(start-d.start), mtu
	}
	for {
		use := min(size, d.tLeft)
		d.tLeft -= use
		size -= use
		if size == 0 {
			return d.start + tr.At(d.tNext)
		}
		d.tNext, d.tLeft = d.tNext+1, mtu
	}
}

// depart sends p, whose serialization started at t and ends at txEnd,
// through the delay stage.
func (d *Dir) depart(t, txEnd time.Duration, p Packet) {
	d.busy = max(d.busy, txEnd)
	dep := txEnd + d.cur.Delay + d.jitter()
	if dep < txEnd {
		dep = txEnd // jitter never makes the delay negative
	}
	if !d.cur.Reorder && dep < d.last {
		dep = d.last
	}
	d.last = max(d.last, dep)
	wait := t - p.Arrival
	d.stats.Packets++
	d.stats.Bytes += uint64(p.Size)
	d.hist.record(wait)
	d.evs = append(d.evs, Event{Ref: p.Ref, Size: p.Size, Depart: dep, Wait: wait})
}

// Stats returns a snapshot of the direction's counters.
func (d *Dir) Stats() DirStats {
	s := d.stats
	s.QueueDelay = d.hist.summary()
	if d.cur.Rate > 0 || d.cur.Trace != nil || d.q.Len() > 0 {
		s.Queue = d.q.String()
	}
	return s
}

// Refuse counts a packet of size bytes that entered the direction but was
// dropped with cause c before the model saw it (by the NAT in front of it).
func (d *Dir) Refuse(size int, c Cause) {
	d.stats.Arrived++
	d.stats.ArrivedBytes += uint64(size)
	if c == CauseNAT {
		d.stats.DropNAT++
	}
}

// Queue returns the direction's queue (for its String, Len and Bytes).
func (d *Dir) Queue() Queue { return d.q }

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
	s.Queue = "droptail" + QueueLimits{Bytes: m.limit}.args()
	return s
}
