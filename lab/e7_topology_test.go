package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/link"
)

// TestE7BothLegsLossyWithoutDelay builds the network of one E7 cell (the
// study's set-up) with the real emulator and sends datagrams through it:
// the publisher's and the subscriber's links each drop packets in both
// directions at the cell's loss, and no link adds delay. The emulator's
// parameters are those the fabric hands it; its counters show the drops.
func TestE7BothLegsLossyWithoutDelay(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	specs, _ := Builtin("e7")
	s := specs[0]
	s.Losses, s.Transports = []Percent{25}, []string{TransportMQTT}
	cells, err := Cells([]Spec{s})
	if err != nil || len(cells) != 1 {
		t.Fatalf("%d cells, %v", len(cells), err)
	}
	c := cells[0]
	topo := BuildTopology(c, "")
	for _, l := range topo.Links {
		ln, err := toLink(l)
		if err != nil {
			t.Fatal(err)
		}
		up, down := ln.Impaired()
		for _, p := range []link.Params{up, down} {
			if p.Loss != 0.25 || p.Delay != 0 || p.Jitter != 0 {
				t.Fatalf("link %s: emulator gets %v, want 25 %% loss and no delay", l.Name, p)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nw, err := LinkFabric{Prefix: "iotqe7t-"}.Up(ctx, topo)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	n := nw.(*linkNet).n

	// The broker echoes; pub and sub each send 400 datagrams to it, so
	// every direction of both links sees about 400 packets.
	var pc net.PacketConn
	if err := n.Do(NodeBroker, func() (err error) { pc, err = net.ListenPacket("udp4", ":7007"); return }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			k, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:k], addr)
		}
	}()
	defer func() { pc.Close(); <-done }()
	const total = 400
	for _, node := range []string{NodePub, NodeSub} {
		to := netip.MustParseAddr(nw.Addr(NodeBroker, node))
		var conn *net.UDPConn
		if err := n.Do(node, func() (err error) {
			conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 7007)))
			return
		}); err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, 60)
		for i := range total {
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			if i%20 == 19 {
				time.Sleep(time.Millisecond) // far below any socket buffer limit
			}
		}
		// wait until the echoes stopped arriving: nothing is delayed, so a
		// quiet 200 ms means every survivor is back
		got := 0
		buf := make([]byte, 2048)
		for {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := conn.Read(buf); err != nil {
				break
			}
			got++
		}
		conn.Close()
		t.Logf("%s: %d of %d datagrams came back through both directions", node, got, total)
	}
	counters, err := nw.Counters()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range n.Stats() {
		seen[s.Link+" "+s.Direction()] = true
		// 25 % of about 400 (fewer on the way back): well inside 10-40 %
		if s.Arrived < 200 || s.DropRandom == 0 {
			t.Errorf("%s %s: %d arrived, %d dropped at random: want the cell's loss on this leg", s.Link, s.Direction(), s.Arrived, s.DropRandom)
			continue
		}
		if frac := float64(s.DropRandom) / float64(s.Arrived); frac < 0.10 || frac > 0.40 {
			t.Errorf("%s %s: dropped %.2f of its packets, want about 0.25", s.Link, s.Direction(), frac)
		}
	}
	for _, want := range []string{"pub pub->broker", "pub broker->pub", "sub sub->broker", "sub broker->sub"} {
		if !seen[want] {
			t.Errorf("no counters for %s (have %v; lab counters %s)", want, seen, fmt.Sprint(counters))
		}
	}
}
