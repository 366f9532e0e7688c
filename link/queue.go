package link

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Packet is what a Queue holds: the packet's size, when it entered the
// queue, and an opaque reference its owner uses to find the data again.
type Packet struct {
	Size    int
	Arrival time.Duration
	Ref     any
}

// Queue is the buffer in front of one link direction's serializer, in the
// spirit of Mahimahi's AbstractPacketQueue: the timing lives in Dir (when
// the serializer is free, the delay after it), the buffering and the drop
// policy live here. The packet being serialized has left the queue.
//
// The limits of the built-in disciplines also count the packet being
// serialized (Dir reports it through an unexported method), as the
// emulator always did: a drop-tail queue of L bytes never delays a packet
// by more than L at the rate.
//
// A Queue has no clock: Enqueue sees the packet's Arrival, Dequeue the
// time the serializer takes the packet, so an AQM (CoDel, PIE) can measure
// sojourn times. A Queue is not safe for concurrent use; its Dir owns it.
type Queue interface {
	// Enqueue offers p. It returns the packets dropped to make room (p
	// itself for drop-tail, the oldest ones for drop-head), nil if none.
	// The slice is valid until the next call.
	Enqueue(p Packet) []Packet
	// Dequeue removes the next packet to serialize at now; false when the
	// queue is empty. (An AQM that drops at dequeue time will report its
	// drops through an optional interface that Dir checks for.)
	Dequeue(now time.Duration) (Packet, bool)
	// Len and Bytes are the packets and bytes waiting.
	Len() int
	Bytes() int
	// String describes the discipline and its limits as ParseQueue reads
	// them ("droptail,bytes=30000").
	String() string
}

// QueueLimits bound a dropping queue; zero means unlimited on that axis.
type QueueLimits struct {
	Bytes   int
	Packets int
}

// exceeded reports whether bytes/packets are over the limits.
func (l QueueLimits) exceeded(bytes, packets int) bool {
	return (l.Bytes > 0 && bytes > l.Bytes) || (l.Packets > 0 && packets > l.Packets)
}

func (l QueueLimits) args() string {
	var s string
	if l.Bytes > 0 {
		s += ",bytes=" + strconv.Itoa(l.Bytes)
	}
	if l.Packets > 0 {
		s += ",packets=" + strconv.Itoa(l.Packets)
	}
	return s
}

// QueueSpec names a queue discipline and its limits, as written on the
// command line and in topology files: "droptail", "droptail,bytes=30000",
// "drophead,packets=100". The zero value is drop-tail with the default
// limit (Params.QueueBytes, else one bandwidth-delay product).
type QueueSpec struct {
	// Name is a discipline of the registry (QueueNames); empty means
	// droptail.
	Name string
	// Bytes and Packets are the limits; both zero means the default.
	Bytes   int
	Packets int
}

// queueKind is one row of the registry.
type queueKind struct {
	doc  string
	make func(QueueLimits) Queue
}

// queueKinds is the registry of disciplines: name -> constructor. An AQM
// joins as one more row.
func queueKinds() map[string]queueKind {
	return map[string]queueKind{
		"droptail": {"drop the arriving packet when it does not fit",
			func(l QueueLimits) Queue { return &dropTail{limits: l} }},
		"drophead": {"drop the oldest waiting packets until the arriving one fits",
			func(l QueueLimits) Queue { return &dropHead{dropTail{limits: l}} }},
	}
}

// QueueNames lists the disciplines ParseQueue accepts, sorted.
func QueueNames() []string {
	var names []string
	for n := range queueKinds() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParseQueue reads a queue spec: NAME[,bytes=SIZE][,packets=N], for
// example "droptail,bytes=30000" or "drophead,packets=100". A bare size
// ("30000", "64kb") means drop-tail limited to that many bytes. SIZE is
// read by ParseBytes.
func ParseQueue(s string) (QueueSpec, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return QueueSpec{}, fmt.Errorf("queue is empty: give a discipline such as droptail,bytes=30000 (or one of %s)", strings.Join(QueueNames(), ", "))
	}
	if t[0] >= '0' && t[0] <= '9' || t[0] == '.' {
		b, err := ParseBytes(t)
		if err != nil {
			return QueueSpec{}, fmt.Errorf("queue %q: %w", s, err)
		}
		return QueueSpec{Bytes: b}, nil
	}
	parts := strings.Split(t, ",")
	spec := QueueSpec{Name: strings.ToLower(strings.TrimSpace(parts[0]))}
	if _, ok := queueKinds()[spec.Name]; !ok {
		return QueueSpec{}, fmt.Errorf("queue %q: unknown discipline %q: use one of %s", s, parts[0], strings.Join(QueueNames(), ", "))
	}
	for _, a := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(a), "=")
		if !ok {
			return QueueSpec{}, fmt.Errorf("queue %q: argument %q: write it as bytes=SIZE or packets=N", s, a)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "bytes":
			b, err := ParseBytes(v)
			if err != nil {
				return QueueSpec{}, fmt.Errorf("queue %q: bytes: %w", s, err)
			}
			spec.Bytes = b
		case "packets":
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return QueueSpec{}, fmt.Errorf("queue %q: packets %q is not a count: give a whole number such as 100", s, v)
			}
			spec.Packets = n
		default:
			return QueueSpec{}, fmt.Errorf("queue %q: unknown argument %q: use bytes= or packets=", s, k)
		}
	}
	return spec, nil
}

// Validate reports what is wrong with s.
func (s QueueSpec) Validate() error {
	if _, ok := queueKinds()[s.name()]; !ok {
		return fmt.Errorf("queue discipline %q is unknown: use one of %s", s.Name, strings.Join(QueueNames(), ", "))
	}
	if s.Bytes < 0 || s.Packets < 0 {
		return fmt.Errorf("queue limits bytes=%d packets=%d: use positive numbers (or 0 for the default)", s.Bytes, s.Packets)
	}
	return nil
}

func (s QueueSpec) name() string {
	if s.Name == "" {
		return "droptail"
	}
	return s.Name
}

// String writes s as ParseQueue reads it; "1BDP" stands for the default
// limit.
func (s QueueSpec) String() string {
	l := QueueLimits{Bytes: s.Bytes, Packets: s.Packets}
	if l == (QueueLimits{}) {
		return s.name() + ",1BDP"
	}
	return s.name() + l.args()
}

// NewQueue builds the queue s names with limits l (the caller resolves the
// defaults; see Params.QueueLimits).
func NewQueue(s QueueSpec, l QueueLimits) (Queue, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return queueKinds()[s.name()].make(l), nil
}

// QueueLimits resolves the limits of p's queue on a link whose round trip
// is rtt: Queue.Bytes/Queue.Packets when given, else QueueBytes, else one
// bandwidth-delay product (QueueLimit). A packet limit alone leaves bytes
// unlimited.
func (p Params) QueueLimits(rtt time.Duration) QueueLimits {
	l := QueueLimits{Bytes: p.Queue.Bytes, Packets: p.Queue.Packets}
	if l.Bytes == 0 && l.Packets == 0 {
		l.Bytes = p.QueueLimit(rtt)
	} else if l.Bytes == 0 && p.QueueBytes > 0 {
		l.Bytes = p.QueueBytes
	}
	return l
}

// queueString describes p's queue for Params.String.
func (p Params) queueString() string {
	s := p.Queue
	if s.Bytes == 0 && s.Packets == 0 && p.QueueBytes > 0 {
		s.Bytes = p.QueueBytes
	}
	return s.String()
}

// ring is a FIFO of packets on a growable ring buffer.
type ring struct {
	buf     []Packet
	head, n int
	bytes   int
	dropped []Packet // Enqueue's result, reused
}

func (r *ring) push(p Packet) {
	if r.n == len(r.buf) {
		nb := make([]Packet, max(16, 2*len(r.buf)))
		for i := range r.n {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = p
	r.n++
	r.bytes += p.Size
}

func (r *ring) pop() (Packet, bool) {
	if r.n == 0 {
		return Packet{}, false
	}
	p := r.buf[r.head]
	r.buf[r.head] = Packet{} // drop the reference
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= p.Size
	return p, true
}

// dropTail drops the arriving packet when it does not fit.
type dropTail struct {
	limits QueueLimits
	held   QueueLimits // bytes and packets the serializer holds (reserve)
	q      ring
}

// fits reports whether extra bytes in extra packets fit besides what waits.
func (d *dropTail) fits(bytes, packets int) bool {
	return !d.limits.exceeded(d.q.bytes+d.held.Bytes+bytes, d.q.n+d.held.Packets+packets)
}

func (d *dropTail) Enqueue(p Packet) []Packet {
	if !d.fits(p.Size, 1) {
		d.q.dropped = append(d.q.dropped[:0], p)
		return d.q.dropped
	}
	d.q.push(p)
	return nil
}

func (d *dropTail) Dequeue(time.Duration) (Packet, bool) { return d.q.pop() }
func (d *dropTail) Len() int                             { return d.q.n }
func (d *dropTail) Bytes() int                           { return d.q.bytes }
func (d *dropTail) String() string                       { return "droptail" + d.limits.args() }

// SetLimits changes the limits (a scheduled rate change moves the default
// one bandwidth-delay product); waiting packets stay.
func (d *dropTail) SetLimits(l QueueLimits) { d.limits = l }

// reserve tells the queue what the serializer holds: the packet being
// serialized counts against the limits, so a queue of one BDP never
// delays a packet by more than one BDP's worth of serialization.
func (d *dropTail) reserve(bytes, packets int) {
	d.held = QueueLimits{Bytes: bytes, Packets: packets}
}

// dropHead drops the oldest waiting packets until the arriving one fits; a
// packet that would not fit in an empty queue is dropped itself.
type dropHead struct{ dropTail }

func (d *dropHead) Enqueue(p Packet) []Packet {
	d.q.dropped = d.q.dropped[:0]
	if d.limits.exceeded(d.held.Bytes+p.Size, d.held.Packets+1) {
		d.q.dropped = append(d.q.dropped, p)
		return d.q.dropped
	}
	for !d.fits(p.Size, 1) {
		old, _ := d.q.pop()
		d.q.dropped = append(d.q.dropped, old)
	}
	d.q.push(p)
	if len(d.q.dropped) == 0 {
		return nil
	}
	return d.q.dropped
}

func (d *dropHead) String() string { return "drophead" + d.limits.args() }
