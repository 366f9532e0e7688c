package link

import (
	"encoding/binary"
	"testing"
	"time"
)

// TestNATRebindAt: a NAT made with Params.NAT and no rebind step passes
// packets untouched until rebindAt (Network.Change) starts an epoch; from
// then on the flow leaves from a new port and answers to the old one are
// dropped.
func TestNATRebindAt(t *testing.T) {
	if newNAT(Params{}) != nil {
		t.Fatal("a NAT without Params.NAT or a rebind step")
	}
	n := newNAT(Params{NAT: true})
	if n == nil {
		t.Fatal("Params.NAT made no NAT")
	}
	a, b := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	out := func(now time.Duration) uint16 {
		p := ipv4(protoUDP, a, b, 5000, 1883, []byte("x"))
		if !n.outbound(now, p) {
			t.Fatal("outbound dropped")
		}
		return binary.BigEndian.Uint16(p[20:])
	}
	in := func(now time.Duration, port uint16) bool {
		return n.inbound(now, ipv4(protoUDP, b, a, 1883, port, []byte("y")))
	}
	if got := out(time.Second); got != 5000 || !in(time.Second, 5000) {
		t.Fatalf("before any rebind: port %d", got)
	}
	n.rebindAt(2 * time.Second)
	if got := out(3 * time.Second); got != natFirstPort {
		t.Fatalf("after the rebind: port %d, want %d", got, natFirstPort)
	}
	if in(3*time.Second, 5000) {
		t.Error("an answer to the retired port passed")
	}
	if !in(3*time.Second, natFirstPort) {
		t.Error("an answer to the new port was dropped")
	}
}

// TestDirApply: a step applied now changes the delay of the packets that
// arrive after it, not of those before.
func TestDirApply(t *testing.T) {
	d := NewDir(Params{Delay: 10 * time.Millisecond}, 20*time.Millisecond, 0, 1)
	ev := d.Arrive(time.Second, 100, 1)
	if len(ev) != 1 || ev[0].Depart != time.Second+10*time.Millisecond {
		t.Fatalf("before: %+v", ev)
	}
	delay := 50 * time.Millisecond
	d.Apply(2*time.Second, Step{Delay: &delay})
	ev = d.Arrive(2*time.Second, 100, 2)
	if len(ev) != 1 || ev[0].Depart != 2*time.Second+delay {
		t.Fatalf("after: %+v", ev)
	}
}
