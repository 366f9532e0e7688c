package lab

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/link"
)

// repRunner runs reps repetitions per cell, waiting at the repetition gate
// between two, each taking take and reporting the emulator lateness late
// to the guard; it records how many cells were inside a repetition at
// each repetition's start (this one included).
type repRunner struct {
	mu       sync.Mutex
	inRep    int
	atStart  []int
	guard    *TimingGuard
	reps     int
	late     time.Duration
	take     time.Duration
	cancel   func() // called at the start of repetition cancelAt of any cell (0: never)
	cancelAt int
}

func (p *repRunner) RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error) {
	for rep := 1; rep <= p.reps; rep++ {
		if rep > 1 {
			if err := waitRepGate(ctx); err != nil {
				return CellSummary{}, err
			}
		}
		p.mu.Lock()
		p.inRep++
		p.atStart = append(p.atStart, p.inRep)
		if p.cancel != nil && len(p.atStart) == p.cancelAt {
			p.cancel()
		}
		p.mu.Unlock()
		t := time.NewTimer(p.take)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		p.mu.Lock()
		p.inRep--
		p.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return CellSummary{}, err
		}
		p.guard.Record(link.DelaySummary{N: 1000, P99: p.late, Max: p.late, Hist: []link.Bucket{{UpperUS: latBucket(p.late), N: 1000}}})
	}
	return (&fakeRunner{}).RunCell(ctx, c, dir)
}

func fourCellSpecs(t *testing.T) []Spec {
	t.Helper()
	s := testSpecs(t)
	s[0].Losses = []Percent{0} // 2 qos x 2 transports = 4 cells
	return s
}

// TestRepGateLowersWithinACell: four cells of six repetitions each, all
// four started at once, on a host whose every repetition is late: the
// admission control lowers the limit while they run, and since cells give
// their slot back between repetitions the lower limit holds before any
// cell ends (without the gate all four would run their six repetitions
// side by side).
func TestRepGateLowersWithinACell(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{}
	r := &repRunner{guard: g, reps: 6, late: 25 * time.Millisecond, take: 50 * time.Millisecond}
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = Run(context.Background(), fourCellSpecs(t), Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 4, Timing: g})
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return: a cell waits at the gate for good")
	}
	if !errors.Is(err, ErrTimingBound) {
		t.Fatalf("want ErrTimingBound (every repetition late), got %v", err)
	}
	if res.Ran != 4 || res.Failed != 0 {
		t.Fatalf("the campaign must complete: %+v", res)
	}
	if len(r.atStart) != 24 {
		t.Fatalf("%d repetitions started, want 24", len(r.atStart))
	}
	if r.atStart[3] != 4 {
		t.Fatalf("the four cells did not start side by side: %v", r.atStart)
	}
	// The second half of the repetitions ran one at a time.
	for i, n := range r.atStart[12:] {
		if n != 1 {
			t.Fatalf("repetition start %d had %d cells inside a repetition, want 1 once lowered: %v", 12+i, n, r.atStart)
		}
	}
	m := readManifestT(t, dir)
	if et := m.EmulatorTiming; et == nil || len(et.Admission) < 2 || et.Admission[len(et.Admission)-1].Limit != 1 {
		t.Fatalf("admission steps: %+v", m.EmulatorTiming)
	}
}

// TestRepGateCancelWhileWaiting: a campaign interrupted while cells wait
// at the gate ends (no cell stays counted) and can be resumed.
func TestRepGateCancelWhileWaiting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{Refuse: time.Second} // late enough to lower, not to fail: the resumed run must pass
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &repRunner{guard: g, reps: 6, late: 25 * time.Millisecond, take: 10 * time.Millisecond, cancel: cancel, cancelAt: 10}
	done := make(chan struct{})
	var res Result
	go func() {
		defer close(done)
		res, _ = Run(ctx, fourCellSpecs(t), Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 4, Timing: g})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the cancellation")
	}
	if !res.Interrupted {
		t.Fatalf("result %+v, want interrupted", res)
	}
	r2 := &repRunner{guard: &TimingGuard{Refuse: time.Second}, reps: 2, take: time.Millisecond}
	res2, err := Run(context.Background(), fourCellSpecs(t), Options{Dir: dir, Runner: r2, Now: safeClock(), Jobs: 4, Timing: r2.guard, Resume: true})
	if err != nil || res2.Ran+res2.Skipped != 4 {
		t.Fatalf("resume: %+v, %v", res2, err)
	}
}

// TestGrantWaitingAccounting: a request takes its cell out of the running
// count; grants put it back, first come first served, up to the limit;
// once the cells are cancelled every waiting cell is let go.
func TestGrantWaitingAccounting(t *testing.T) {
	done := make(chan struct{})
	r := &campaignRun{jobs: 2, gates: make(chan gateRequest, 3), running: 3, cellsDone: done}
	reqs := []gateRequest{{grant: make(chan struct{})}, {grant: make(chan struct{})}, {grant: make(chan struct{})}}
	for _, q := range reqs {
		r.gates <- q
	}
	r.grantWaiting()
	if r.running != 2 || len(r.waiting) != 1 {
		t.Fatalf("running %d, waiting %d: want 2 granted (the limit) and 1 waiting", r.running, len(r.waiting))
	}
	for i, q := range reqs {
		select {
		case <-q.grant:
			if i == 2 {
				t.Fatal("the third request was granted past the limit")
			}
		default:
			if i < 2 {
				t.Fatalf("request %d not granted: first come, first served", i)
			}
		}
	}
	close(done)
	r.grantWaiting()
	if r.running != 3 || len(r.waiting) != 0 {
		t.Fatalf("after cancellation: running %d, waiting %d; want every cell let go", r.running, len(r.waiting))
	}
}
