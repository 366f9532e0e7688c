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
