package lab

import (
	"testing"
	"time"
)

// TestProgressETAFollowsTheRun: the ETA comes from the pace of the run so
// far, not from the cells at once asked for: a campaign that asked for 64
// and ran one at a time must not promise 1/64 of the time left.
func TestProgressETAFollowsTheRun(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	now := t0
	p := &progress{started: t0, now: func() time.Time { return now }, jobs: 64, estLeft: 100 * time.Second}
	// Before any cell ends: the estimate shared by the cells asked for.
	if got := p.eta(); got != "2s" {
		t.Fatalf("ETA before the first cell: %s, want 2s (100 s over 64 cells)", got)
	}
	// 10 estimated seconds took 20 s of wall time: 100 s left take 200 s.
	p.estDone = 10 * time.Second
	now = t0.Add(20 * time.Second)
	if got := p.eta(); got != "3m20s" {
		t.Fatalf("ETA after 10 estimated seconds in 20 s: %s, want 3m20s", got)
	}
}
