package link

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// ipv4 builds an IPv4 packet (no options) carrying payload with protocol
// proto, from src to dst; TCP and UDP get ports and a full checksum.
func ipv4(proto uint8, src, dst [4]byte, sport, dport uint16, payload []byte) []byte {
	var l4h []byte
	switch proto {
	case protoTCP:
		l4h = make([]byte, 20)
		l4h[12] = 5 << 4
		l4h[13] = 0x18 // PSH ACK
	case protoUDP:
		l4h = make([]byte, 8)
		binary.BigEndian.PutUint16(l4h[4:], uint16(8+len(payload)))
	}
	if l4h != nil {
		binary.BigEndian.PutUint16(l4h[0:], sport)
		binary.BigEndian.PutUint16(l4h[2:], dport)
	}
	pkt := make([]byte, 20, 20+len(l4h)+len(payload))
	pkt[0] = 0x45
	pkt[8] = 64
	pkt[9] = proto
	copy(pkt[12:], src[:])
	copy(pkt[16:], dst[:])
	pkt = append(append(pkt, l4h...), payload...)
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	switch proto {
	case protoTCP:
		binary.BigEndian.PutUint16(pkt[36:], fullChecksum(pkt, 36))
	case protoUDP:
		binary.BigEndian.PutUint16(pkt[26:], fullChecksum(pkt, 26))
	}
	return pkt
}

// fullChecksum computes the TCP or UDP checksum of pkt from scratch (the
// checksum field at csum counted as zero), pseudo-header included.
func fullChecksum(pkt []byte, csum int) uint16 {
	ihl := int(pkt[0]&0x0f) * 4
	seg := len(pkt) - ihl
	var s uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
	}
	add(pkt[12:20])
	s += uint32(pkt[9]) + uint32(seg)
	c := append([]byte(nil), pkt[ihl:]...)
	c[csum-ihl], c[csum-ihl+1] = 0, 0
	add(c)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	v := ^uint16(s)
	if pkt[9] == protoUDP && v == 0 {
		v = 0xffff
	}
	return v
}

// sameChecksum: a and b are the same ones' complement value (0 and
// 0xffff are both zero).
func sameChecksum(a, b uint16) bool {
	return a == b || a^b == 0xffff && (a == 0 || b == 0)
}

// TestSetPortMatchesFullChecksum: the incremental checksum update equals
// a recomputation from scratch, for random TCP and UDP packets and ports.
func TestSetPortMatchesFullChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		proto := uint8(protoTCP)
		if i%2 == 1 {
			proto = protoUDP
		}
		payload := make([]byte, rng.IntN(64))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		var src, dst [4]byte
		binary.BigEndian.PutUint32(src[:], rng.Uint32())
		binary.BigEndian.PutUint32(dst[:], rng.Uint32())
		pkt := ipv4(proto, src, dst, uint16(rng.Uint32()), uint16(rng.Uint32()), payload)
		l, ok := parseL4(pkt)
		if !ok {
			t.Fatalf("packet %d not parsed", i)
		}
		off := l.off + 2*(i/2%2) // source or destination port
		l.setPort(pkt, off, uint16(rng.Uint32()))
		got := binary.BigEndian.Uint16(pkt[l.csum:])
		if want := fullChecksum(pkt, l.csum); !sameChecksum(got, want) {
			t.Fatalf("packet %d (proto %d): checksum %#04x after the update, recomputed %#04x", i, proto, got, want)
		}
	}
	// A UDP datagram without checksum keeps none.
	pkt := ipv4(protoUDP, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1000, 2000, []byte("x"))
	pkt[26], pkt[27] = 0, 0
	l, _ := parseL4(pkt)
	l.setPort(pkt, l.off, 3000)
	if c := binary.BigEndian.Uint16(pkt[26:]); c != 0 || binary.BigEndian.Uint16(pkt[20:]) != 3000 {
		t.Fatalf("UDP without checksum: checksum %#04x, port %d", c, binary.BigEndian.Uint16(pkt[20:]))
	}
}

// TestNATEpochs walks the NAT through two rebindings: mappings, their
// translation back, and drops of old ones.
func TestNATEpochs(t *testing.T) {
	ms := time.Millisecond
	nt := newNAT(Params{Schedule: []Step{{At: 100 * ms, Rebind: true}, {At: 200 * ms, Down: ms}, {At: 300 * ms, Rebind: true}}})
	if nt == nil {
		t.Fatal("no NAT for a schedule with Rebind steps")
	}
	nt.start = time.Second
	at := func(d time.Duration) time.Duration { return time.Second + d }
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	out := func(now time.Duration, proto uint8, sport uint16) uint16 {
		t.Helper()
		pkt := ipv4(proto, a, b, sport, 80, []byte("hi"))
		if !nt.outbound(now, pkt) {
			t.Fatalf("outbound from %d dropped", sport)
		}
		return binary.BigEndian.Uint16(pkt[20:])
	}
	in := func(now time.Duration, proto uint8, dport uint16) (uint16, bool) {
		t.Helper()
		pkt := ipv4(proto, b, a, 80, dport, []byte("hi"))
		ok := nt.inbound(now, pkt)
		return binary.BigEndian.Uint16(pkt[22:]), ok
	}
	if p := out(at(50*ms), protoUDP, 5000); p != 5000 {
		t.Fatalf("before the first rebind: port %d, want 5000 untouched", p)
	}
	out(at(60*ms), protoUDP, 40000) // an original port the NAT must not hand out
	if p, ok := in(at(60*ms), protoUDP, 5000); !ok || p != 5000 {
		t.Fatalf("reply before the rebind: port %d ok %v", p, ok)
	}
	if p := out(at(150*ms), protoUDP, 5000); p != 40001 {
		t.Fatalf("after the rebind: port %d, want 40001 (40000 is in use)", p)
	}
	if p := out(at(160*ms), protoUDP, 5000); p != 40001 {
		t.Fatalf("same flow, same epoch: port %d, want 40001", p)
	}
	if p := out(at(160*ms), protoTCP, 5000); p != 40002 {
		t.Fatalf("TCP flow on the same port: %d, want its own mapping 40002", p)
	}
	if p, ok := in(at(170*ms), protoUDP, 40001); !ok || p != 5000 {
		t.Fatalf("reply to the new port: port %d ok %v, want 5000 true", p, ok)
	}
	if _, ok := in(at(170*ms), protoUDP, 5000); ok {
		t.Fatal("reply to the epoch-0 port passed")
	}
	if _, ok := in(at(170*ms), protoUDP, 7777); !ok {
		t.Fatal("a packet to a port the NAT never mapped was dropped")
	}
	if p := out(at(350*ms), protoUDP, 5000); p != 40003 {
		t.Fatalf("second rebind: port %d, want 40003", p)
	}
	if _, ok := in(at(360*ms), protoUDP, 40001); ok {
		t.Fatal("reply to the epoch-1 port passed after the second rebind")
	}
	if p, ok := in(at(360*ms), protoUDP, 40003); !ok || p != 5000 {
		t.Fatalf("reply to the epoch-2 port: port %d ok %v", p, ok)
	}
	// ICMP and later fragments pass untouched.
	icmp := ipv4(1, a, b, 0, 0, []byte{8, 0, 0, 0, 0, 1, 0, 1})
	frag := ipv4(protoUDP, a, b, 5000, 80, []byte("hi"))
	binary.BigEndian.PutUint16(frag[6:], 10)
	for _, pkt := range [][]byte{icmp, frag} {
		before := bytes.Clone(pkt)
		if !nt.outbound(at(400*ms), pkt) || !bytes.Equal(pkt, before) {
			t.Fatalf("outbound changed or dropped a packet it must leave alone: % x", before)
		}
	}
	if newNAT(Params{Schedule: []Step{{At: ms, Down: ms}}}) != nil {
		t.Fatal("a NAT for a schedule without Rebind")
	}
}

// TestNATSteadyStateDoesNotAllocate: a known flow's packets cost no
// allocation either way.
func TestNATSteadyStateDoesNotAllocate(t *testing.T) {
	nt := newNAT(Params{Schedule: []Step{{Rebind: true}}})
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	o := ipv4(protoUDP, a, b, 5000, 80, []byte("hi"))
	nt.outbound(time.Second, bytes.Clone(o))
	r := ipv4(protoUDP, b, a, 80, natFirstPort, []byte("hi"))
	allocs := testing.AllocsPerRun(100, func() {
		nt.outbound(time.Second, o)
		nt.inbound(time.Second, r)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet pair", allocs)
	}
}

// FuzzNATRewrite: the NAT never panics, never changes a packet that is not
// IPv4 TCP/UDP, changes only a port and the checksum of those, and keeps a
// valid checksum valid.
func FuzzNATRewrite(f *testing.F) {
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	f.Add(ipv4(protoTCP, a, b, 5000, 80, []byte("hello")), true)
	f.Add(ipv4(protoUDP, a, b, 5000, 80, []byte("hello")), true)
	f.Add(ipv4(protoUDP, b, a, 80, natFirstPort, []byte("reply")), false)
	f.Add(ipv4(protoTCP, b, a, 80, natFirstPort, nil), false)
	f.Add(ipv4(1, a, b, 0, 0, []byte{8, 0, 0, 0, 0, 1, 0, 1}), true)
	f.Add([]byte{0x60, 0, 0, 0}, true)
	f.Fuzz(func(t *testing.T, pkt []byte, outbound bool) {
		nt := newNAT(Params{Schedule: []Step{{Rebind: true}}})
		// Map a flow whose replies the inbound case may hit.
		nt.outbound(time.Second, ipv4(protoUDP, a, b, 5000, 80, nil))
		nt.outbound(time.Second, ipv4(protoTCP, a, b, 5000, 80, nil))
		before := bytes.Clone(pkt)
		if outbound {
			nt.outbound(time.Second, pkt)
		} else {
			nt.inbound(time.Second, pkt)
		}
		if bytes.Equal(pkt, before) {
			return
		}
		if len(pkt) < 20 || pkt[0]>>4 != 4 || (pkt[9] != protoTCP && pkt[9] != protoUDP) || binary.BigEndian.Uint16(pkt[6:])&0x1fff != 0 {
			t.Fatalf("changed a packet that is not an IPv4 TCP/UDP first fragment: % x", before)
		}
		ihl := int(pkt[0]&0x0f) * 4
		csum := ihl + 16
		if pkt[9] == protoUDP {
			csum = ihl + 6
		}
		for i := range pkt {
			port := i >= ihl && i < ihl+4
			if pkt[i] != before[i] && !port && i != csum && i != csum+1 {
				t.Fatalf("byte %d changed (header %d bytes): % x -> % x", i, ihl, before, pkt)
			}
		}
		valid := func(p []byte) bool {
			c := binary.BigEndian.Uint16(p[csum:])
			if p[9] == protoUDP && c == 0 {
				return true
			}
			return sameChecksum(c, fullChecksum(p, csum))
		}
		if valid(before) && !valid(pkt) {
			t.Fatalf("a valid checksum became invalid: % x -> % x", before, pkt)
		}
	})
}

// TestWriteStatsShowsNATDropsOnlyWhenThereAreSome: the table gains a
// "drop nat" column for a run with NAT drops and keeps its old shape
// otherwise.
func TestWriteStatsShowsNATDropsOnlyWhenThereAreSome(t *testing.T) {
	var b bytes.Buffer
	rows := []LinkStats{{Link: "l", From: "a", To: "b"}, {Link: "l", From: "b", To: "a"}}
	if err := WriteStats(&b, rows); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("drop nat")) {
		t.Fatalf("a table without NAT drops has the column:\n%s", b.String())
	}
	rows[1].DropNAT = 7
	b.Reset()
	if err := WriteStats(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(b.Bytes(), []byte("\n"))
	if !bytes.Contains(lines[0], []byte("drop nat")) || !bytes.Contains(lines[2], []byte(" 7 ")) {
		t.Fatalf("a table with NAT drops:\n%s", b.String())
	}
}
