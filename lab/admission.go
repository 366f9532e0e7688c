package lab

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/iotq/iotq/records"
)

// admitMinSamples: an admission window is judged from this many samples
// (probe wake-ups, forwarded packets, paced sends) on; once the window is
// complete any number will do for a reduction (a badly late probe wakes
// rarely: two wake-ups in a window are two late ones).
const admitMinSamples = 100

// admitRefWindows: the reference lateness of one cell is the median of
// this many complete windows measured while one cell ran.
const admitRefWindows = 3

// admission decides how many cells may run at once from the timing
// guard's window, the lateness measured over the last few seconds
// (docs/lab.md, "Admission control"). It first measures a reference: the
// median 99th percentile of a few windows while one cell runs, the
// lateness a cell meets on this host however many run. More cells add
// lateness to it: above the lowering bound (the warn bound, or the
// reference plus half of it, whichever is larger) the limit halves (once
// per window, and only when no more cells than the limit run: a reduction
// takes effect as cells end or reach a repetition gate, repgate.go); a
// complete window under the raising bound
// (half the warn bound, or the reference plus a quarter of it), measured
// while as many cells ran as the limit allows, raises it: doubling until
// the first reduction, then by one. It never exceeds the requested jobs.
// Only Run's goroutine uses it.
type admission struct {
	g         *TimingGuard
	requested int
	limit     int
	slowStart bool // double while calm, until the first reduction
	fixed     bool // never raise: the idle host is already late
	window    time.Duration
	fullSince time.Time // since when running >= limit; zero while below
	refWins   []time.Duration
	ref       time.Duration // the reference; 0 until measured
	measured  bool          // ref is measured (it may be 0 on a quiet host)
}

// bounds returns the lateness above which the limit is lowered and at
// or under which it may be raised. A reference above twice the warn
// bound counts as twice the warn bound: a host that late with one cell
// gets no more.
func (a *admission) bounds() (lower, raise time.Duration) {
	warn, _ := a.g.bounds()
	ref := min(a.ref, 2*warn)
	return max(warn, ref+warn/2), max(warn/2, ref+warn/4)
}

// newAdmission starts at limit cells at once (at most jobs).
func newAdmission(g *TimingGuard, jobs, limit int, fixed bool, now time.Time) *admission {
	w := g.Window
	if w <= 0 {
		w = DefaultAdmitWindow
	}
	a := &admission{g: g, requested: jobs, limit: min(max(limit, 1), jobs), slowStart: true, fixed: fixed, window: w}
	g.resetWindow(now)
	return a
}

// observe notes how many cells run now (after every start and end).
func (a *admission) observe(now time.Time, running int) {
	a.g.noteRunning(running)
	if running >= a.limit {
		if a.fullSince.IsZero() {
			a.fullSince = now
		}
		return
	}
	a.fullSince = time.Time{}
}

// evaluate judges the window and changes the limit; it returns the step
// taken, or nil.
func (a *admission) evaluate(now time.Time, running int) *records.AdmissionStep {
	n, p99, start := a.g.window()
	age := now.Sub(start)
	lower, raise := a.bounds()
	enough := n >= admitMinSamples || (age >= a.window && n > 0)
	// While the reference is measured (one cell) every window runs to
	// its end: a late one is a measurement, not a reason to act.
	if enough && p99 > lower && running <= a.limit && (a.limit > 1 || a.measured) {
		steal, stealOK := a.g.windowSteal()
		a.g.resetWindow(now)
		if a.limit <= 1 {
			return nil
		}
		a.slowStart = false
		reason := fmt.Sprintf("lateness p99 %s over the last %s with %s running, above %s (%s)", fmtMs(p99), age.Round(time.Millisecond), cellsWord(running), fmtMs(lower), a.boundWords())
		if stealOK && steal >= 1 {
			// Said so that a reduction the hypervisor caused reads as such.
			reason += fmt.Sprintf("; the hypervisor took %.0f %% of the CPUs' time over the window (steal)", steal)
		}
		return a.step(now, running, max(1, a.limit/2), n, p99, reason)
	}
	if age < a.window {
		return nil
	}
	a.g.resetWindow(now)
	full := !a.fullSince.IsZero() && !a.fullSince.After(start) // the window measured the limit in use
	if a.fixed || a.limit >= a.requested || n < admitMinSamples || !full {
		return nil
	}
	if !a.measured {
		// Windows of one cell alone, all of them complete and full.
		if a.limit != 1 || running != 1 {
			return nil
		}
		a.refWins = append(a.refWins, p99)
		if len(a.refWins) < admitRefWindows {
			return nil
		}
		a.ref, a.measured = median(a.refWins), true
		a.g.setAdmitRef(a.ref)
		_, raise = a.bounds()
	}
	if p99 > raise {
		return nil
	}
	next := a.limit + 1
	if a.slowStart {
		next = 2 * a.limit
	}
	return a.step(now, running, min(next, a.requested), n, p99,
		fmt.Sprintf("lateness p99 %s over the last %s with %s running, at most %s (%s)", fmtMs(p99), age.Round(time.Millisecond), cellsWord(running), fmtMs(raise), a.boundWords()))
}

// boundWords says what the bounds derive from, for the steps' reasons.
func (a *admission) boundWords() string {
	warn, _ := a.g.bounds()
	if !a.measured {
		return fmt.Sprintf("warn bound %s", fmtMs(warn))
	}
	return fmt.Sprintf("one cell alone: %s; warn bound %s", fmtMs(a.ref), fmtMs(warn))
}

// median returns the median of ds (not empty); it sorts ds.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func (a *admission) step(now time.Time, running, limit int, n int64, p99 time.Duration, reason string) *records.AdmissionStep {
	a.limit = limit
	a.fullSince = time.Time{}
	a.observe(now, running)
	s := records.AdmissionStep{AtNs: now.UnixNano(), Limit: limit, Running: running, P99: p99, N: n, Reason: reason}
	a.g.addStep(s)
	return &s
}

// admitStart runs the guard's idle calibration (with a probe) and picks
// the first limit of cells at once: one, rising as the admission control
// allows; one for good when the idle host is already above the warn
// bound; all jobs without a calibration (nothing measured yet: only
// reductions). It refuses (ErrTimingBound) when the idle host is above
// the fail bound: no cell would be timed accurately. msg says what was
// measured and decided ("" when nothing was).
func (g *TimingGuard) admitStart(ctx context.Context, jobs int) (limit int, fixed bool, msg string, err error) {
	idle, err := g.calibrate(ctx)
	if err != nil {
		return 0, false, "", err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, "", err
	}
	if idle == nil {
		return jobs, false, "", nil
	}
	// However few the wake-ups, each was as late as measured: a probe
	// that woke rarely in the calibration woke late.
	warn, refuse := g.bounds()
	measured := fmt.Sprintf("the idle host woke an ordinary timer %s late at the 99th percentile (%d wake-ups, every %s; load average %s)",
		fmtMs(idle.P99), idle.N, g.ProbeEvery, loadavg())
	switch {
	case idle.P99 > refuse:
		return 0, false, "", fmt.Errorf("%w: before any cell ran, %s, above the fail bound %s: no cell would be timed accurately; run on an idler host",
			ErrTimingBound, measured, fmtMs(refuse))
	case idle.P99 > warn:
		m := fmt.Sprintf("timing guard: %s, above the warn bound %s", measured, fmtMs(warn))
		if jobs > 1 {
			m += fmt.Sprintf(": one cell at a time, not %d", jobs)
			g.calibrationStep(idle, fmt.Sprintf("idle calibration: p99 %s above the warn bound %s: one cell at a time for good", fmtMs(idle.P99), fmtMs(warn)))
		}
		return 1, true, m, nil
	case jobs > 1:
		g.calibrationStep(idle, fmt.Sprintf("idle calibration: p99 %s: one cell at first, more as the measured lateness allows", fmtMs(idle.P99)))
		return 1, false, fmt.Sprintf("timing guard: %s; starting with one cell at once, up to %d as the measured lateness allows", measured, jobs), nil
	}
	return 1, false, "", nil
}

// calibrationStep records the calibration's limit of one cell as the
// first admission step.
func (g *TimingGuard) calibrationStep(idle *records.Lateness, reason string) {
	g.addStep(records.AdmissionStep{AtNs: time.Now().UnixNano(), Limit: 1, P99: idle.P99, N: idle.N, Reason: reason})
}
