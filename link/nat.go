// The rebinding NAT of a link direction (Step.Rebind): port translation
// of TCP and UDP packets, with checksums updated incrementally.

package link

import (
	"encoding/binary"
	"sync"
	"time"
)

// natFirstPort is the first external port the NAT hands out; later ones
// count up from it (deterministic, so runs with the same schedule and
// traffic map flows alike).
const natFirstPort = 40000

// natKey names a flow behind the NAT (protocol, address, port); the same
// shape names an external mapping (protocol, inside address, external
// port), as the NAT rewrites ports only.
type natKey struct {
	proto uint8
	addr  [4]byte
	port  uint16
}

// natFlow is the current mapping of a flow: its external port and the
// epoch (number of Rebind steps passed) in which it was made.
type natFlow struct {
	ext   uint16
	epoch int
}

// natRev is an external mapping seen from outside: the flow's original
// port and the epoch of the mapping.
type natRev struct {
	orig  uint16
	epoch int
}

// nat is the NAT in front of endpoint A of a link whose direction A->B
// has Rebind steps (or Params.NAT). Outbound packets (A->B) are read by
// A's reader, inbound ones (B->A) by B's: mu guards the tables and at
// (Network.Change adds to it while the readers run). start is set before
// the readers start and only read after.
type nat struct {
	start time.Duration // when the link came up (schedule origin)

	mu    sync.Mutex
	at    []time.Duration // the Rebind steps' times, ascending
	flows map[natKey]natFlow
	rev   map[natKey]natRev
	used  map[uint16]bool // ports in use behind the NAT: original and external
	next  uint16          // next candidate external port
}

// newNAT returns the NAT of a direction with parameters p, nil if no step
// rebinds.
func newNAT(p Params) *nat {
	var at []time.Duration
	for _, s := range p.Schedule {
		if s.Rebind {
			at = append(at, s.At)
		}
	}
	if len(at) == 0 && !p.NAT {
		return nil
	}
	return &nat{at: at, flows: map[natKey]natFlow{}, rev: map[natKey]natRev{}, used: map[uint16]bool{}, next: natFirstPort}
}

// rebindAt adds a rebind at d after the link came up (Network.Change),
// keeping the times in order.
func (t *nat) rebindAt(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := len(t.at)
	for i > 0 && t.at[i-1] > d {
		i--
	}
	t.at = append(t.at, 0)
	copy(t.at[i+1:], t.at[i:])
	t.at[i] = d
}

// epoch is the number of Rebind steps due at now. t.mu must be held.
func (t *nat) epoch(now time.Duration) int {
	e := 0
	for _, a := range t.at {
		if now >= t.start+a {
			e++
		}
	}
	return e
}

// alloc returns a free external port, false when every port from
// natFirstPort up is taken. t.mu must be held.
func (t *nat) alloc() (uint16, bool) {
	for range 65536 - natFirstPort {
		p := t.next
		t.next++
		if t.next < natFirstPort { // wrapped past 65535
			t.next = natFirstPort
		}
		if !t.used[p] {
			t.used[p] = true
			return p, true
		}
	}
	return 0, false
}

// outbound translates a packet leaving A (entering A->B) at now: from the
// first Rebind on, its source port becomes the flow's external port of
// the current epoch, allocated on the flow's first packet in the epoch.
// Before it, flows are only recorded (their ports are epoch 0's
// mappings). False means drop: the NAT has no port left.
func (t *nat) outbound(now time.Duration, pkt []byte) bool {
	l, ok := parseL4(pkt)
	if !ok {
		return true
	}
	k := natKey{proto: l.proto, addr: [4]byte(pkt[12:16]), port: binary.BigEndian.Uint16(pkt[l.off:])}
	t.mu.Lock()
	ep := t.epoch(now)
	f, seen := t.flows[k]
	if !seen {
		t.used[k.port] = true
	}
	switch {
	case ep == 0:
		if !seen {
			t.flows[k] = natFlow{ext: k.port}
			t.rev[k] = natRev{orig: k.port}
		}
		t.mu.Unlock()
		return true
	case !seen || f.epoch != ep:
		ext, ok := t.alloc()
		if !ok {
			t.mu.Unlock()
			return false
		}
		f = natFlow{ext: ext, epoch: ep}
		t.flows[k] = f
		t.rev[natKey{proto: k.proto, addr: k.addr, port: ext}] = natRev{orig: k.port, epoch: ep}
	}
	t.mu.Unlock()
	l.setPort(pkt, l.off, f.ext)
	return true
}

// inbound translates a packet entering B->A at now: one addressed to an
// external port of the current epoch gets the flow's original port back;
// one addressed to a mapping of an earlier epoch is dropped (false), as
// the NAT forgot it. Anything else passes untouched.
func (t *nat) inbound(now time.Duration, pkt []byte) bool {
	l, ok := parseL4(pkt)
	if !ok {
		return true
	}
	k := natKey{proto: l.proto, addr: [4]byte(pkt[16:20]), port: binary.BigEndian.Uint16(pkt[l.off+2:])}
	t.mu.Lock()
	ep := t.epoch(now)
	r, ok := t.rev[k]
	t.mu.Unlock()
	switch {
	case !ok:
		return true
	case r.epoch < ep:
		return false
	case r.orig != k.port:
		l.setPort(pkt, l.off+2, r.orig)
	}
	return true
}

// l4 locates the transport header of an IPv4 TCP or UDP packet.
type l4 struct {
	proto uint8
	off   int // start of the transport header
	csum  int // offset of the transport checksum
}

const (
	protoTCP = 6
	protoUDP = 17
)

// parseL4 finds the ports and checksum of pkt; false for anything but an
// IPv4 TCP or UDP packet whose header is complete, and for fragments
// after the first (they carry no ports).
func parseL4(pkt []byte) (l4, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return l4{}, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || len(pkt) < ihl {
		return l4{}, false
	}
	if binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
		return l4{}, false
	}
	switch pkt[9] {
	case protoTCP:
		if len(pkt) < ihl+18 {
			return l4{}, false
		}
		return l4{proto: protoTCP, off: ihl, csum: ihl + 16}, true
	case protoUDP:
		if len(pkt) < ihl+8 {
			return l4{}, false
		}
		return l4{proto: protoUDP, off: ihl, csum: ihl + 6}, true
	}
	return l4{}, false
}

// setPort writes port at off (the source or destination port) and updates
// the transport checksum incrementally (RFC 1624, eqn. 3). The IPv4
// header checksum does not cover ports.
func (l l4) setPort(pkt []byte, off int, port uint16) {
	old := binary.BigEndian.Uint16(pkt[off:])
	if old == port {
		return
	}
	binary.BigEndian.PutUint16(pkt[off:], port)
	hc := binary.BigEndian.Uint16(pkt[l.csum:])
	if l.proto == protoUDP && hc == 0 {
		return // no checksum: stays none
	}
	hc = csumUpdate(hc, old, port)
	if l.proto == protoUDP && hc == 0 {
		hc = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(pkt[l.csum:], hc)
}

// csumUpdate returns the Internet checksum hc after a 16-bit word of the
// covered data changed from old to new: HC' = ~(~HC + ~m + m').
func csumUpdate(hc, old, new uint16) uint16 {
	s := uint32(^hc) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}
