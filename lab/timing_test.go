package lab

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
		m.EmulatorTiming.RefuseP99 != TimingRefuseP99 || m.EmulatorTiming.LoadavgEnd == "" || m.EmulatorTiming.JobsRun != 4 {
		t.Fatalf("manifest jobs %d, timing %+v", m.Jobs, m.EmulatorTiming)
	}
}

// slowRunner's cells take a moment (so that cells allowed at once do
// overlap), report the given emulator lateness to the guard, and record
// how many cells ran at each start.
type slowRunner struct {
	mu       sync.Mutex
	inFlight int
	atStart  []int // cells running at each start, this one included
	guard    *TimingGuard
	late     time.Duration
	take     time.Duration
}

func (p *slowRunner) RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error) {
	p.mu.Lock()
	p.inFlight++
	p.atStart = append(p.atStart, p.inFlight)
	p.mu.Unlock()
	defer func() { p.mu.Lock(); p.inFlight--; p.mu.Unlock() }()
	t := time.NewTimer(p.take)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return CellSummary{}, ctx.Err()
	}
	if p.guard != nil {
		ub := latBucket(p.late)
		p.guard.Record(link.DelaySummary{N: 1000, P99: p.late, Max: p.late, Hist: []link.Bucket{{UpperUS: ub, N: 1000}}})
	}
	return (&fakeRunner{}).RunCell(ctx, c, dir)
}

// TestCampaignAdmissionLowersJobs: a campaign asked for 4 cells at once
// on a host whose cells report lateness above the bounds runs with fewer
// (down to one at a time), says so, completes, and is marked fail in its
// manifest: Run returns ErrTimingBound and tells not to publish.
func TestCampaignAdmissionLowersJobs(t *testing.T) {
	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{}
	r := &slowRunner{guard: g, late: 25 * time.Millisecond, take: 20 * time.Millisecond}
	var prog strings.Builder
	res, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 4, Timing: g, Progress: &prog})
	if !errors.Is(err, ErrTimingBound) || !strings.Contains(err.Error(), "ms late at the 99th percentile") || !strings.Contains(err.Error(), "do not publish") {
		t.Fatalf("want ErrTimingBound naming the lateness and saying not to publish, got %v", err)
	}
	if res.Ran != 12 || res.Failed != 0 {
		t.Fatalf("the campaign must complete with fewer cells at once: %+v", res)
	}
	out := prog.String()
	if !strings.Contains(out, "timing guard: at most 2 cells at once from now (--jobs 4)") || !strings.Contains(out, "TIMING GUARD FAILED") {
		t.Fatalf("no admission or failure message in the progress output:\n%s", out)
	}
	// Once lowered to one, the rest ran one at a time.
	if n := len(r.atStart); n != 12 || slices.Max(r.atStart[n-4:]) != 1 || slices.Max(r.atStart) > 4 {
		t.Fatalf("cells running at each start: %v", r.atStart)
	}
	m := readManifestT(t, dir)
	et := m.EmulatorTiming
	if et == nil || et.Status != TimingFail || !et.Failed() || m.Jobs != 4 || et.Jobs != 4 || et.JobsRun > 4 || et.JobsRun < 2 ||
		len(et.Admission) < 2 || et.Admission[len(et.Admission)-1].Limit != 1 || !strings.Contains(et.Note, "no evidence") {
		t.Fatalf("manifest jobs %d, timing %+v", m.Jobs, et)
	}
	t.Logf("admission: %+v", et.Admission)
}

// TestCampaignTimingWarn: lateness between the bounds warns, lowers the
// cells at once and still counts as evidence (status warn, no error).
func TestCampaignTimingWarn(t *testing.T) {
	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{}
	r := &slowRunner{guard: g, late: 3 * time.Millisecond, take: 5 * time.Millisecond}
	var prog strings.Builder
	res, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 2, Timing: g, Progress: &prog})
	if err != nil || res.Ran != 12 {
		t.Fatalf("%+v %v", res, err)
	}
	if m := readManifestT(t, dir); m.EmulatorTiming.Status != TimingWarn || m.EmulatorTiming.Failed() {
		t.Fatalf("manifest timing %+v", m.EmulatorTiming)
	}
	if !strings.Contains(prog.String(), "warning: the link emulator forwarded packets") || !strings.Contains(prog.String(), "at most one cell at once") {
		t.Fatalf("progress output:\n%s", prog.String())
	}
}

// busyEveryP keeps every P of the runtime busy with a CPU-bound loop for
// at most d (and a bounded number of iterations), so that a goroutine
// woken by its timer waits for a P. It returns the function that ends the
// loops early and waits for them.
func busyEveryP(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var sink atomic.Uint64 // keeps the loops' work from being optimised away
	deadline := time.Now().Add(d)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for i := 0; i < 1<<36; i++ {
				x = x*6364136223846793005 + 1442695040888963407
				if i&0xfff == 0 {
					select {
					case <-done:
						sink.Add(x)
						return
					default:
					}
					if time.Now().After(deadline) {
						sink.Add(x)
						return
					}
				}
			}
		}()
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }); wg.Wait() }
}

// oldProbe is the probe as it was: lateness from the value received on
// the timer's channel, which the runtime back-dates to when the timer was
// due. Kept here only to show what it missed.
func oldProbe(every time.Duration, record func(time.Duration)) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(every)
		defer t.Stop()
		want := time.Now().Add(every)
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				record(max(now.Sub(want), 0))
				want = time.Now().Add(every)
				t.Reset(every)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// TestHostProbeSeesLoad: with a CPU-bound goroutine on every P, the probe's
// goroutine waits for a P after each timer (until the scheduler preempts a
// busy loop, up to about 10 ms), and the probe's 99th percentile exceeds
// the warn bound. The old probe, reading the back-dated time from the
// timer's channel beside it, saw next to nothing (logged, not judged).
func TestHostProbeSeesLoad(t *testing.T) {
	const every = time.Millisecond
	idle := &TimingGuard{ProbeEvery: every}
	stop, _ := idle.startProbe()
	time.Sleep(300 * time.Millisecond)
	_ = stop()

	g := &TimingGuard{ProbeEvery: every}
	var mu sync.Mutex
	old := latHist{}
	var oldN int64
	stopBusy := busyEveryP(3 * time.Second)
	defer stopBusy()
	time.Sleep(20 * time.Millisecond) // the loops hold the Ps
	stopProbe, _ := g.startProbe()
	stopOld := oldProbe(every, func(d time.Duration) { mu.Lock(); old.add(d); oldN++; mu.Unlock() })
	time.Sleep(time.Second)
	_ = stopProbe()
	stopOld()
	stopBusy()

	ri, r := idle.Report(1), g.Report(1)
	mu.Lock()
	oldP99 := histQuantile(old.buckets(), 0.99)
	mu.Unlock()
	t.Logf("probe p99: idle %v (%d wake-ups); busy loops on %d Ps: %v (%d wake-ups, max %v); old method beside it: %v (%d wake-ups)",
		ri.HostP99, ri.HostSamples, runtime.GOMAXPROCS(0), r.HostP99, r.HostSamples, r.HostMax, oldP99, oldN)
	if r.HostSamples < 10 {
		t.Fatalf("the probe woke %d times in a second", r.HostSamples)
	}
	if r.HostP99 <= TimingWarnP99 {
		t.Fatalf("with every P busy the probe's p99 is %v, not above the warn bound %v: it does not see load", r.HostP99, TimingWarnP99)
	}
}

// TestCalibrationJudgesTheIdleHost: before the first cell the guard
// measures the host; a host already late refuses to start (nothing
// written) when above the fail bound, and runs one cell at a time, with a
// message, when above the warn bound. The lateness is real: busy loops on
// every P during the calibration.
func TestCalibrationJudgesTheIdleHost(t *testing.T) {
	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "refused")
	g := &TimingGuard{ProbeEvery: time.Millisecond, Calibrate: 500 * time.Millisecond, Refuse: 2 * time.Millisecond}
	stopBusy := busyEveryP(2 * time.Second)
	_, err := Run(context.Background(), specs, Options{Dir: dir, Runner: &fakeRunner{}, Now: safeClock(), Jobs: 4, Timing: g})
	stopBusy()
	if !errors.Is(err, ErrTimingBound) || !strings.Contains(err.Error(), "idle host woke an ordinary timer") || !strings.Contains(err.Error(), "wake-ups") {
		t.Fatalf("want a refusal naming what the calibration measured, got %v", err)
	}
	t.Log(err)
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a refused campaign left %s behind (%v)", dir, serr)
	}

	dir = filepath.Join(t.TempDir(), "lowered")
	g = &TimingGuard{ProbeEvery: time.Millisecond, Calibrate: 500 * time.Millisecond, Refuse: time.Hour}
	r := &slowRunner{take: 5 * time.Millisecond}
	var prog strings.Builder
	stopBusy = busyEveryP(2 * time.Second)
	defer stopBusy()
	go func() { time.Sleep(600 * time.Millisecond); stopBusy() }() // load during the calibration only
	res, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Jobs: 4, Timing: g, Progress: &prog})
	if err != nil || res.Ran != 12 {
		t.Fatalf("%+v %v", res, err)
	}
	if !strings.Contains(prog.String(), "above the warn bound 1.00 ms: one cell at a time, not 4") || slices.Max(r.atStart) != 1 {
		t.Fatalf("cells at once %v; progress:\n%s", r.atStart, prog.String())
	}
	if m := readManifestT(t, dir); m.EmulatorTiming.IdleP99 <= TimingWarnP99 || m.EmulatorTiming.IdleSamples == 0 || m.EmulatorTiming.JobsRun != 1 ||
		len(m.EmulatorTiming.Admission) != 1 || !strings.Contains(m.EmulatorTiming.Admission[0].Reason, "idle calibration") {
		t.Fatalf("manifest timing %+v", m.EmulatorTiming)
	}
}

// TestAdmissionControl drives the admission control with measured
// windows: three windows of one cell give the reference, calm windows at
// the limit raise it (doubling, then by one after a reduction), a late
// window halves it once the running cells are within it, never beyond the
// requested jobs or below one.
func TestAdmissionControl(t *testing.T) {
	g := &TimingGuard{Window: 100 * time.Millisecond}
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	feed := func(late time.Duration) {
		for range 150 {
			g.recordHost(late)
		}
	}
	a := newAdmission(g, 5, 1, false, t0)
	want := func(st any, limit int) {
		t.Helper()
		if a.limit != limit {
			t.Fatalf("limit %d, want %d (step %+v)", a.limit, limit, st)
		}
	}
	a.observe(at(0), 1)
	feed(100 * time.Microsecond)
	want(a.evaluate(at(50), 1), 1)  // the window is not complete
	want(a.evaluate(at(150), 1), 1) // the reference's first window
	feed(100 * time.Microsecond)
	want(a.evaluate(at(300), 1), 1)
	feed(100 * time.Microsecond)
	want(a.evaluate(at(450), 1), 2) // reference 0.1 ms: raise
	if g.Report(5).AdmitReference != 100*time.Microsecond {
		t.Fatalf("reference %v", g.Report(5).AdmitReference)
	}
	a.observe(at(460), 2) // the second cell started after the window began
	feed(100 * time.Microsecond)
	want(a.evaluate(at(600), 2), 2)
	feed(100 * time.Microsecond)
	want(a.evaluate(at(750), 2), 4)
	a.observe(at(760), 4)
	feed(700 * time.Microsecond) // above half the warn bound: hold
	want(a.evaluate(at(900), 4), 4)
	feed(3 * time.Millisecond)
	want(a.evaluate(at(910), 4), 2)
	feed(3 * time.Millisecond)
	want(a.evaluate(at(920), 4), 2) // four still run: the reduction has not taken effect
	a.observe(at(930), 2)
	feed(3 * time.Millisecond)
	want(a.evaluate(at(940), 2), 1)
	feed(3 * time.Millisecond)
	want(a.evaluate(at(950), 1), 1)
	a.observe(at(960), 1)
	feed(100 * time.Microsecond)
	want(a.evaluate(at(1100), 1), 2) // after a reduction: one more, not double
	if n := len(g.Report(5).Admission); n != 5 {
		t.Fatalf("%d admission steps recorded, want 5", n)
	}
	fixed := newAdmission(g, 5, 1, true, t0)
	fixed.observe(at(0), 1)
	feed(100 * time.Microsecond)
	if fixed.evaluate(at(200), 1); fixed.limit != 1 {
		t.Fatalf("a fixed limit rose to %d", fixed.limit)
	}
}

// TestAdmissionReference: on a host where one cell alone already meets
// 1.2 ms (above the warn bound: a VM's timer wake-ups), more cells are
// allowed while they add at most a quarter of the warn bound to that, and
// taken away when they add more than half of it; a host at 5 ms with one
// cell gets no second one.
func TestAdmissionReference(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := func(ref time.Duration) (*admission, *TimingGuard, func(time.Duration)) {
		g := &TimingGuard{Window: 100 * time.Millisecond}
		feed := func(late time.Duration) {
			for range 150 {
				g.recordHost(late)
			}
		}
		a := newAdmission(g, 8, 1, false, t0)
		a.observe(at(0), 1)
		for i := range 3 {
			feed(ref)
			a.evaluate(at(150*(i+1)), 1)
		}
		return a, g, feed
	}
	a, g, feed := run(1200 * time.Microsecond)
	if a.limit != 2 || g.Report(8).AdmitReference != 1200*time.Microsecond {
		t.Fatalf("limit %d reference %v: one cell's own lateness must not keep the limit at one", a.limit, g.Report(8).AdmitReference)
	}
	steps := g.Report(8).Admission
	if r := steps[len(steps)-1].Reason; !strings.Contains(r, "one cell alone: 1.20 ms") {
		t.Fatalf("reason %q does not name the reference", r)
	}
	a.observe(at(460), 2) // the second cell started after the window began
	feed(1400 * time.Microsecond)
	a.evaluate(at(600), 2)
	feed(1400 * time.Microsecond) // adds 0.2 ms: raise
	if a.evaluate(at(750), 2); a.limit != 4 {
		t.Fatalf("limit %d after a window of 1.4 ms", a.limit)
	}
	a.observe(at(760), 4)
	feed(1600 * time.Microsecond)
	a.evaluate(at(900), 4)
	feed(1600 * time.Microsecond) // adds 0.4 ms: hold
	if a.evaluate(at(1050), 4); a.limit != 4 {
		t.Fatalf("limit %d after a window of 1.6 ms", a.limit)
	}
	feed(1800 * time.Microsecond) // adds 0.6 ms: lower
	if a.evaluate(at(1060), 4); a.limit != 2 {
		t.Fatalf("limit %d after a window of 1.8 ms", a.limit)
	}

	a, _, _ = run(5 * time.Millisecond)
	if a.limit != 1 {
		t.Fatalf("a host 5 ms late with one cell got %d at once", a.limit)
	}
}

// TestProbeProcessSeesLoad: the probe as a process of its own (this test
// binary, re-run as the probe) measures the host as the node processes
// meet it: with CPU-bound loops on every CPU beside it, its 99th
// percentile exceeds the warn bound; idle, it stays under it.
func TestProbeProcessSeesLoad(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := []string{self}
	t.Setenv(probeChildEnv, "1ms")
	measure := func(busy bool) TimingReport {
		g := &TimingGuard{ProbeEvery: time.Millisecond, ProbeCommand: cmd}
		if busy {
			// Four loops per CPU, each on a thread of its own: the probe
			// process competes with all of them for a CPU.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))
			stopBusy := busyEveryP(3 * time.Second)
			defer stopBusy()
		}
		stop, err := g.startProbe()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return g.Report(1)
	}
	idle, busy := measure(false), measure(true)
	t.Logf("probe process p99: idle %v (%d wake-ups), busy loops on %d CPUs: %v (%d wake-ups, max %v)",
		idle.HostP99, idle.HostSamples, runtime.NumCPU(), busy.HostP99, busy.HostSamples, busy.HostMax)
	if idle.HostProbe != records.HostProbeProcess || idle.HostSamples < 100 || busy.HostSamples < 10 {
		t.Fatalf("probe %q, %d and %d wake-ups", idle.HostProbe, idle.HostSamples, busy.HostSamples)
	}
	if busy.HostP99 <= TimingWarnP99 {
		t.Fatalf("with every CPU busy the probe process's p99 is %v, not above the warn bound %v", busy.HostP99, TimingWarnP99)
	}
}

// probeChildEnv makes this test binary the probe (TestProbeChildProcess)
// with the period it holds.
const probeChildEnv = "IOTQ_LAB_TEST_PROBE_EVERY"

// probeChildMain is the probe process of TestProbeProcessSeesLoad (see
// TestMain).
func probeChildMain(every string) int {
	d, err := time.ParseDuration(every)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := ProbeLoop(ctx, d, os.Stdout); err != nil {
		return 1
	}
	return 0
}

// TestProbeProcessErrors: a probe command that does not exist, or that
// prints something else than samples, is reported.
func TestProbeProcessErrors(t *testing.T) {
	g := &TimingGuard{ProbeEvery: time.Millisecond, ProbeCommand: []string{"/nonexistent/iotq", "lab", "probe"}}
	if _, err := g.startProbe(); err == nil || !strings.Contains(err.Error(), "/nonexistent/iotq") {
		t.Fatalf("got %v", err)
	}
	g = &TimingGuard{ProbeEvery: time.Millisecond, ProbeCommand: []string{"sh", "-c", "echo hello; sleep 5"}}
	stop, err := g.startProbe()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := stop(); err == nil || !strings.Contains(err.Error(), `"hello"`) {
		t.Fatalf("got %v", err)
	}
	g = &TimingGuard{ProbeEvery: time.Millisecond, ProbeCommand: []string{"sh", "-c", "echo 5; echo oops >&2; exit 3"}}
	stop, err = g.startProbe()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := stop(); err == nil || !strings.Contains(err.Error(), "ended before") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("got %v", err)
	}
}

// TestSendLatenessJudged: the publishers' send lateness goes into each
// cell's done.json and the manifest, and decides the status when it is the
// largest.
func TestSendLatenessJudged(t *testing.T) {
	pubs := []records.PubRecord{{Seq: 0, SendNs: 1_000_000_000}, {Seq: 1, SendNs: 1_010_000_000}, {Seq: 2, SendNs: 1_023_000_000}, {Seq: 3, SendNs: 1_030_000_100}}
	got := sendLateness(pubs, 10*time.Millisecond)
	if want := []time.Duration{0, 0, 3 * time.Millisecond, 100}; !slices.Equal(got, want) {
		t.Fatalf("send lateness %v, want %v", got, want)
	}
	if sendLateness(pubs[1:], 10*time.Millisecond) != nil || sendLateness(pubs, 0) != nil {
		t.Fatal("no message 0 or no interval: the schedule is unknown")
	}
	// Message 2's hand-over blocked until 1.045 s: message 3 (due at 1.030
	// s) was ready then and left 0.2 ms later; the 15 ms before are the
	// transport's, not the host's. Records without ready_ns keep the due
	// time.
	blocked := []records.PubRecord{{Seq: 0, SendNs: 1_000_000_000, ReadyNs: 1_000_000_000},
		{Seq: 1, SendNs: 1_010_000_000, ReadyNs: 1_010_000_000}, {Seq: 2, SendNs: 1_020_000_000, ReadyNs: 1_020_000_000},
		{Seq: 3, SendNs: 1_045_200_000, ReadyNs: 1_045_000_000}, {Seq: 4, SendNs: 1_045_300_000}}
	if got, want := sendLateness(blocked, 10*time.Millisecond), []time.Duration{0, 0, 0, 200 * time.Microsecond, 5_300_000}; !slices.Equal(got, want) {
		t.Fatalf("send lateness with ready times %v, want %v", got, want)
	}

	specs := testSpecs(t)
	dir := filepath.Join(t.TempDir(), "out")
	g := &TimingGuard{}
	r := runnerFunc(func(ctx context.Context, c Cell, d string) (CellSummary, error) {
		sum, err := (&fakeRunner{}).RunCell(ctx, c, d)
		late := make([]time.Duration, 100)
		for i := range late {
			late[i] = 20 * time.Millisecond
		}
		sum.SendLate = summarizeLateness(late)
		return sum, err
	})
	_, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: safeClock(), Timing: g})
	if !errors.Is(err, ErrTimingBound) || !strings.Contains(err.Error(), "publishers sent their paced messages") {
		t.Fatalf("got %v", err)
	}
	et := readManifestT(t, dir).EmulatorTiming
	if et.Send == nil || et.Send.N != 1200 || et.Send.P99 < 16*time.Millisecond || et.SendCellP99Worst != 20*time.Millisecond || et.Status != TimingFail {
		t.Fatalf("manifest timing %+v send %+v", et, et.Send)
	}
	d, _, err := readDone(filepath.Join(dir, DirCells, cellsOf(t, dir)[0]))
	if err != nil || d.Timing == nil || d.Timing.Send == nil || d.Timing.Send.P99 != 20*time.Millisecond || d.Timing.Status != TimingFail {
		t.Fatalf("done.json timing %+v (%v)", d.Timing, err)
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
	stop, err := g.startProbe()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
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
	if r.Status != TimingFail || r.HostP99 < 32*time.Millisecond || !strings.Contains(r.Note, "ordinary processes") {
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
	// A failed run's late packets stay in the combined figures, whichever
	// run came last; an old record that says refused counts as failed.
	ref := TimingReport{Jobs: 8, Pkts: 1000, Max: 40 * time.Millisecond, Hist: []records.TimingBucket{{UpperUS: 32768, N: 1000}}, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	judgeTiming(&ref)
	if ref.Status != TimingFail || !ref.Failed() {
		t.Fatalf("late record: %s", ref.Status)
	}
	if s := CombineTiming(&ra, &ref).Status; s != TimingFail {
		t.Fatalf("last run failed: %s", s)
	}
	if s := CombineTiming(&ref, &ra).Status; s != TimingFail {
		t.Fatalf("resumed after a failed run: %s", s)
	}
	if old := (&TimingReport{Status: TimingRefused}); !old.Failed() {
		t.Fatal("an old refused record must count as failed")
	}
	// Send lateness adds up across runs.
	sa := TimingReport{Send: &records.Lateness{N: 300, Max: time.Millisecond, Hist: []records.TimingBucket{{UpperUS: 64, N: 300}}}, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	sb := TimingReport{Send: &records.Lateness{N: 100, Max: 3 * time.Millisecond, Hist: []records.TimingBucket{{UpperUS: 4096, N: 100}}}, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	if c := CombineTiming(&sa, &sb); c.Send.N != 400 || c.Send.Max != 3*time.Millisecond || c.Send.P99 < 2048*time.Microsecond || c.Status != TimingWarn {
		t.Fatalf("combined send %+v status %s", c.Send, c.Status)
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

// TestProbeProcessOutlivesItsStarter: the probe process is started from a
// goroutine locked to its thread that then exits locked, so the runtime
// ends the thread (as it does an emulator's forwarding thread): the
// probe's parent-death signal must not fire, it keeps sampling.
func TestProbeProcessOutlivesItsStarter(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(probeChildEnv, "1ms")
	g := &TimingGuard{ProbeEvery: time.Millisecond, ProbeCommand: []string{self}}
	var stop func() error
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		var err error
		stop, err = g.startProbe()
		started <- err
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("the probe died with the thread that started it: %v", err)
	}
	if n := g.Report(1).HostSamples; n < 200 {
		t.Fatalf("%d samples in 500 ms at 1 ms", n)
	}
}

// TestCPUSteal: /proc/stat's steal column is read as a share of all the
// CPUs' time; the timing record keeps the ticks, combined runs add them
// up, and a warn note names the steal.
func TestCPUSteal(t *testing.T) {
	ct, ok := parseCPUTimes("cpu  100 5 50 800 10 1 4 30 20 0\ncpu0 50 2 25 400 5 0 2 15 10 0\n")
	if !ok || ct.total != 1000 || ct.steal != 30 {
		t.Fatalf("parsed %+v %v, want total 1000 (guest not counted twice), steal 30", ct, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 3 4 5 6 7 x 9\n"} {
		if _, ok := parseCPUTimes(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	if _, err := os.Stat("/proc/stat"); err == nil {
		if _, ok := readCPUTimes(); !ok {
			t.Error("this host's /proc/stat was not read")
		}
	}
	a := TimingReport{CPUTicks: 1000, StealTicks: 100, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	b := TimingReport{CPUTicks: 3000, StealTicks: 0, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	c := CombineTiming(&a, &b)
	if pct, ok := c.StealPct(); !ok || pct != 2.5 {
		t.Fatalf("combined steal %v %v, want 2.5 %%", pct, ok)
	}
	if _, ok := (&TimingReport{}).StealPct(); ok {
		t.Fatal("a record without CPU ticks has no steal")
	}
	w := TimingReport{Status: TimingWarn, P99: 2 * time.Millisecond, Pkts: 1000, CPUTicks: 1000, StealTicks: 80, WarnP99: TimingWarnP99, RefuseP99: TimingRefuseP99}
	if note := explainTiming(w); !strings.Contains(note, "the hypervisor took 8.0 % of the CPUs' time (steal)") {
		t.Fatalf("note without the steal: %s", note)
	}
	g := &TimingGuard{}
	g.sampleLoad()
	g.sampleLoad()
	if r := g.Report(1); r.CPUTicks < 0 || r.StealTicks < 0 || r.StealTicks > r.CPUTicks {
		t.Fatalf("guard's ticks %d steal %d", r.CPUTicks, r.StealTicks)
	}
}
