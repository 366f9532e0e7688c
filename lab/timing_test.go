package lab

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
)

// parRunner runs the fake cells concurrently-safely and records how many
// ran at once. The first `barrier` cells wait (bounded) until that many
// are in flight, so the test does not depend on scheduling luck. late,
// when set, reports that lateness to the guard from the given cell index.
type parRunner struct {
	mu       sync.Mutex
	inFlight int
	maxSeen  int
	started  int
	barrier  int
	reached  chan struct{}
	guard    *TimingGuard
	lateFrom int
	late     time.Duration
}

func (p *parRunner) RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error) {
	p.mu.Lock()
	p.inFlight++
	p.started++
	idx := p.started
	p.maxSeen = max(p.maxSeen, p.inFlight)
	if p.inFlight == p.barrier && p.reached != nil {
		close(p.reached)
		p.reached = nil
	}
	wait := p.reached
	p.mu.Unlock()
	defer func() { p.mu.Lock(); p.inFlight--; p.mu.Unlock() }()
	if wait != nil && idx <= p.barrier {
		select {
		case <-wait:
		case <-time.After(20 * time.Second):
		case <-ctx.Done():
			return CellSummary{}, ctx.Err()
		}
	}
	if p.guard != nil {
		s := link.DelaySummary{N: 1000, P99: 50 * time.Microsecond, Max: 80 * time.Microsecond, Hist: []link.Bucket{{UpperUS: 64, N: 1000}}}
		if p.late > 0 && idx >= p.lateFrom {
			// All of this cell's packets were late by about p.late.
			ub := int64(1)
			for time.Duration(ub)*time.Microsecond <= p.late {
				ub *= 2
			}
			s.P99, s.Max, s.Hist = p.late, p.late, []link.Bucket{{UpperUS: ub, N: 1000}}
		}
		p.guard.Record(s)
	}
	return (&fakeRunner{}).RunCell(ctx, c, dir)
}

func safeClock() func() time.Time {
	var mu sync.Mutex
	c := fixedClock()
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return c() }
}

func readManifestT(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCampaignJobsRunsCellsAtOnceWithTheSameResults: --jobs 4 runs four
// cells at once and produces the same result files as one at a time.
func TestCampaignJobsRunsCellsAtOnceWithTheSameResults(t *testing.T) {
	specs := testSpecs(t)
	one := filepath.Join(t.TempDir(), "one")
	if _, err := Run(context.Background(), specs, Options{Dir: one, Runner: &fakeRunner{}, Now: fixedClock()}); err != nil {
		t.Fatal(err)
	}
	par := filepath.Join(t.TempDir(), "par")
	g := &TimingGuard{}
	r := &parRunner{barrier: 4, reached: make(chan struct{}), guard: g}
	res, err := Run(context.Background(), specs, Options{Dir: par, Runner: r, Now: safeClock(), Jobs: 4, Timing: g})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 12 || res.Failed != 0 {
		t.Fatalf("result %+v", res)
	}
	if r.maxSeen != 4 {
		t.Fatalf("at most %d cells ran at once, want 4", r.maxSeen)
	}
	a, b := readResults(t, one), readResults(t, par)
	for name := range a {
		if a[name] != b[name] {
			t.Errorf("%s differs between --jobs 1 and --jobs 4:\n%s\n---\n%s", name, a[name], b[name])
		}
	}
	m := readManifestT(t, par)
	if m.Jobs != 4 || m.EmulatorTiming == nil || m.EmulatorTiming.Jobs != 4 || m.EmulatorTiming.Status != TimingOK ||
		m.EmulatorTiming.Cells != 12 || m.EmulatorTiming.Pkts != 12000 || m.EmulatorTiming.CellP99Worst != 50*time.Microsecond ||
		m.EmulatorTiming.P99 < 32*time.Microsecond || m.EmulatorTiming.P99 >= 64*time.Microsecond ||
		m.EmulatorTiming.RefuseP99 != TimingRefuseP99 || m.EmulatorTiming.LoadavgEnd == "" {
		t.Fatalf("manifest jobs %d, timing %+v", m.Jobs, m.EmulatorTiming)
	}
}

// TestCampaignTimingGuard: lateness above the hard bound with several
// jobs stops the campaign with ErrTimingBound (completed cells kept, the
// manifest says refused); one job at a time only warns, and resuming with
// one job completes the campaign.
func TestCampaignTimingGuard(t *testing.T) {
	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{}
	r := &parRunner{guard: g, lateFrom: 3, late: 25 * time.Millisecond}
	var prog strings.Builder
	res, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 2, Timing: g, Progress: &prog})
	if !errors.Is(err, ErrTimingBound) || !strings.Contains(err.Error(), "ms late at the 99th percentile") || !strings.Contains(err.Error(), "fewer --jobs") {
		t.Fatalf("want ErrTimingBound naming the lateness and the remedy, got %v", err)
	}
	if res.Ran < 2 || res.Ran >= 12 {
		t.Fatalf("refused campaign ran %d cells", res.Ran)
	}
	if m := readManifestT(t, dir); m.EmulatorTiming == nil || m.EmulatorTiming.Status != TimingRefused || m.Cells.Pending == 0 {
		t.Fatalf("manifest after refusal: timing %+v cells %+v", m.EmulatorTiming, m.Cells)
	}
	g2 := &TimingGuard{}
	prog.Reset()
	r2 := &parRunner{guard: g2, lateFrom: 1, late: 25 * time.Millisecond}
	res, err = Run(context.Background(), specs, Options{Dir: dir, Resume: true, Runner: r2, Now: safeClock(), Jobs: 1, Timing: g2, Progress: &prog})
	if err != nil {
		t.Fatalf("one job must only warn: %v", err)
	}
	if res.Skipped+res.Ran != 12 || res.Failed != 0 {
		t.Fatalf("resume result %+v", res)
	}
	if m := readManifestT(t, dir); m.EmulatorTiming.Status != TimingWarn || m.Jobs != 1 ||
		m.EmulatorTiming.Runs != 2 || m.EmulatorTiming.Jobs != 2 || m.EmulatorTiming.Cells < 12 {
		// The record covers both runs: every cell of the results.
		t.Fatalf("manifest after a late single-job run: %+v", m.EmulatorTiming)
	}
	if !strings.Contains(prog.String(), "warning: the link emulator forwarded packets") {
		t.Fatalf("no warning in the progress output:\n%s", prog.String())
	}
}

func TestCampaignRefusesTooManyJobs(t *testing.T) {
	_, err := Run(context.Background(), testSpecs(t), Options{Dir: t.TempDir(), Runner: &fakeRunner{}, Jobs: MaxJobs + 1})
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("got %v", err)
	}
}

func TestEstimateWall(t *testing.T) {
	specs, _ := Builtin("e1")
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	var sum, longest time.Duration
	for _, c := range cells {
		sum += estimate(c)
		longest = max(longest, estimate(c))
	}
	if got := EstimateWall(cells, 1); got != sum {
		t.Fatalf("one job: %v, want the sum %v", got, sum)
	}
	for _, j := range []int{2, 6, 36, 100} {
		got := EstimateWall(cells, j)
		if got < sum/time.Duration(j) || got < longest || got > sum/time.Duration(j)+longest {
			t.Fatalf("%d jobs: %v outside [max(sum/j, longest), sum/j+longest] (sum %v, longest %v)", j, got, sum, longest)
		}
	}
	// A full E1 (36 cells of about 1000 s) with 36 jobs takes about one cell.
	if got := EstimateWall(cells, 36); got > 30*time.Minute {
		t.Fatalf("E1 with 36 jobs estimated at %v", got)
	}
	if FormatWall(45*time.Second) != "45s" || FormatWall(12*time.Minute) != "12m" || FormatWall(3*time.Hour+5*time.Minute) != "3h05m" {
		t.Fatal("FormatWall")
	}
}

func TestHistQuantile(t *testing.T) {
	h := []records.TimingBucket{{UpperUS: 64, N: 90}, {UpperUS: 2048, N: 10}}
	// The 99th of 100 is the 9th of 10 in [1024, 2048) us.
	if got := histQuantile(h, 0.99); got < 1800*time.Microsecond || got > 2000*time.Microsecond {
		t.Fatalf("p99 %v", got)
	}
	if got := histQuantile(h, 0.5); got < 32*time.Microsecond || got >= 64*time.Microsecond {
		t.Fatalf("p50 %v", got)
	}
}

// TestHostProbe: the probe samples an ordinary timer while it runs, stops
// when told, and a host that wakes processes late is judged like a late
// emulator.
func TestHostProbe(t *testing.T) {
	g := &TimingGuard{ProbeEvery: time.Millisecond}
	stop := g.startProbe()
	time.Sleep(300 * time.Millisecond)
	stop()
	r := g.Report(1)
	if r.HostSamples < 20 || r.HostMax < 0 {
		t.Fatalf("probe: %+v", r)
	}
	n := r.HostSamples
	time.Sleep(20 * time.Millisecond)
	if g.Report(1).HostSamples != n {
		t.Fatal("the probe kept running after stop")
	}
	late := &TimingGuard{}
	for range 300 {
		late.recordHost(40 * time.Millisecond)
	}
	r = late.Report(2)
	if r.Status != TimingRefused || r.HostP99 < 32*time.Millisecond || !strings.Contains(explainTiming(r), "ordinary processes") {
		t.Fatalf("late host: %+v: %s", r, explainTiming(r))
	}
}

// TestCombineTiming: two runs combine as one guard that saw both: counts
// and histograms add, the percentiles come from the sums, the per-cell
// median from every cell; records without histograms keep their figures.
func TestCombineTiming(t *testing.T) {
	a, b := &TimingGuard{}, &TimingGuard{}
	for range 3 {
		a.Record(link.DelaySummary{N: 1000, P99: 50 * time.Microsecond, Max: 60 * time.Microsecond, Hist: []link.Bucket{{UpperUS: 64, N: 1000}}})
	}
	b.Record(link.DelaySummary{N: 1000, P99: 3 * time.Millisecond, Max: 4 * time.Millisecond, Hist: []link.Bucket{{UpperUS: 4096, N: 1000}}})
	for range 300 {
		b.recordHost(100 * time.Microsecond)
	}
	ra, rb := a.Report(4), b.Report(1)
	if ra.Status != TimingOK || rb.Status != TimingWarn {
		t.Fatalf("parts: %s %s", ra.Status, rb.Status)
	}
	c := CombineTiming(nil, &ra, &rb)
	if c.Runs != 2 || c.Jobs != 4 || c.Cells != 4 || c.Judged != 4 || c.Pkts != 4000 || c.Max != 4*time.Millisecond ||
		c.HostSamples != 300 || len(c.CellP99s) != 4 || c.CellP99Worst != 3*time.Millisecond || c.CellP99Median != 50*time.Microsecond {
		t.Fatalf("combined: %+v", c)
	}
	// A quarter of the packets were 2-4 ms late (bucket [2048, 4096) us): the p99 is in that bucket.
	if c.P99 < 2048*time.Microsecond || c.P99 >= 4096*time.Microsecond || c.Status != TimingWarn {
		t.Fatalf("combined p99 %v status %s", c.P99, c.Status)
	}
	if c.HostP99 < 64*time.Microsecond || c.HostP99 >= 128*time.Microsecond {
		t.Fatalf("combined host p99 %v", c.HostP99)
	}
	// The inputs are not changed.
	if ra.Pkts != 3000 || len(ra.Hist) != 1 || ra.Hist[0].N != 3000 {
		t.Fatalf("input changed: %+v", ra)
	}
	// A record written before the histograms were kept: its figures stay.
	old := TimingReport{Jobs: 2, Cells: 5, Pkts: 100, P99: 7 * time.Millisecond, HostP99: 9 * time.Millisecond, HostSamples: 50,
		CellP99Worst: 8 * time.Millisecond, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99, Status: TimingWarn}
	c = CombineTiming(&old, &ra)
	if c.HostP99 != 9*time.Millisecond || c.CellP99Worst != 8*time.Millisecond || c.Cells != 8 || c.Status != TimingOK && c.Status != TimingWarn {
		t.Fatalf("with an old record: %+v", c)
	}
	if CombineTiming(nil, nil) != nil {
		t.Fatal("nothing combined must be nil")
	}
	// Refused stays only when the last run was refused.
	ref := TimingReport{Jobs: 8, Pkts: 1000, Hist: []records.TimingBucket{{UpperUS: 32768, N: 1000}}, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	judgeTiming(&ref)
	if ref.Status != TimingRefused {
		t.Fatalf("late record: %s", ref.Status)
	}
	if s := CombineTiming(&ra, &ref).Status; s != TimingRefused {
		t.Fatalf("last run refused: %s", s)
	}
	if s := CombineTiming(&ref, &ra).Status; s != TimingWarn {
		t.Fatalf("resumed after a refusal: %s", s)
	}
}

// TestCampaignStartGap: with StartGap, cells start at least that far
// apart even when slots are free.
func TestCampaignStartGap(t *testing.T) {
	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "out")
	var mu sync.Mutex
	var starts []time.Time
	r := runnerFunc(func(ctx context.Context, c Cell, d string) (CellSummary, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return (&fakeRunner{}).RunCell(ctx, c, d)
	})
	gap := 20 * time.Millisecond
	if _, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 12, StartGap: gap}); err != nil {
		t.Fatal(err)
	}
	if len(starts) != 12 {
		t.Fatalf("%d cells started", len(starts))
	}
	// The runner sees each start a little after the campaign made it, so
	// judge the span of all starts, with room for one late first start.
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	if span, want := starts[len(starts)-1].Sub(starts[0]), 11*gap-gap/2; span < want {
		t.Fatalf("12 cells started within %v, want at least %v (11 gaps of %v)", span, want, gap)
	}
}

// runnerFunc is a CellRunner of one function.
type runnerFunc func(ctx context.Context, c Cell, dir string) (CellSummary, error)

func (f runnerFunc) RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error) {
	return f(ctx, c, dir)
}
