package report

import (
	"math"
	"testing"

	"github.com/iotq/iotq/records"
)

// TestPublisherEgressOnly: a publisher link impaired on its egress only
// has a round trip of its delay once (the testbed's E1-E3), which lowers
// the start-up bound, and its cells are a variant of their own.
func TestPublisherEgressOnly(t *testing.T) {
	both := Link{PubDelayNs: 600e6, PubRateBps: 1.5e6, SubRateBps: 100e6}
	egress := both
	egress.PubDirection = records.DirectionEgress
	// TCP+TLS: 2 round trips + the one-way path.
	if got := startupBound(both, "mqtts", false); math.Abs(got-3000) > 1e-6 {
		t.Fatalf("both directions: bound %v ms, want 3000", got)
	}
	if got := startupBound(egress, "mqtts", false); math.Abs(got-1800) > 1e-6 {
		t.Fatalf("egress only: bound %v ms, want 1800", got)
	}
	if delayBound(both, 0) != delayBound(egress, 0) {
		t.Fatal("the one-way delay bound must not depend on the return path")
	}
	a := &CellResult{Size: 100, Link: both}
	b := &CellResult{Size: 100, Link: egress}
	if a.variant() == b.variant() || b.variantLabel() != "100B, publisher egress impaired" {
		t.Fatalf("variants %q %q, label %q", a.variant(), b.variant(), b.variantLabel())
	}
}

// TestPacketsSentApartFromReceived: the publisher's packets per direction
// (E3b; the testbed counted what the device sent): sent is everything it
// offered to its link, lost ones included; received is what the link
// delivered to it; the medium's other publishers count for neither.
func TestPacketsSentApartFromReceived(t *testing.T) {
	ds := &dataset{links: []records.LinkCount{
		{Cell: "c", Rep: 1, Link: records.LinkPub, Direction: "pub->broker", Packets: 100, Bytes: 9000, DropRandom: 7},
		{Cell: "c", Rep: 1, Link: records.LinkPub, Direction: "broker->pub", Packets: 60, Bytes: 3000, DropRandom: 4, DropQueue: 1},
		{Cell: "c", Rep: 2, Link: records.LinkPub, Direction: "pub->broker", Packets: 10, Bytes: 900},
		{Cell: "c", Rep: 1, Link: records.LinkSub, Direction: "broker->sub", Packets: 500, Bytes: 50000},
		{Cell: "m", Rep: 1, Link: records.LinkMedium, Direction: "pub->broker", Packets: 20},
		{Cell: "m", Rep: 1, Link: records.LinkMedium, Direction: "pub2->broker", Packets: 30},
		{Cell: "m", Rep: 1, Link: records.LinkMedium, Direction: "broker->pub2", Packets: 30},
		{Cell: "m", Rep: 1, Link: records.LinkMedium, Direction: "broker->pub", Packets: 12, DropRetries: 2},
	}}
	cells := map[string]*CellResult{"c": {Cell: "c"}, "m": {Cell: "m"}}
	linkCounters(ds, cells)
	for id, want := range map[string][3]int64{"c": {110, 55, 170}, "m": {20, 10, 92}} {
		c := cells[id]
		if c.PacketsSent != want[0] || c.PacketsReceived != want[1] || c.Packets != want[2] {
			t.Errorf("cell %s: sent %d, received %d, both directions %d; want %v", id, c.PacketsSent, c.PacketsReceived, c.Packets, want)
		}
	}
}
