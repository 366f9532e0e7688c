package lab

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
)

// Bounds on the link emulator's timing error: the lateness of its
// forwarding thread (write time minus the model's departure time), judged
// at the 99th percentile over every packet the run's cells forwarded. Above TimingWarnP99 the campaign warns
// and the manifest says so; above TimingRefuseP99 a campaign running
// several cells at once (--jobs > 1) stops: its cells no longer see the
// links they claim to. One cell at a time only warns (nothing to reduce).
const (
	TimingWarnP99   = time.Millisecond
	TimingRefuseP99 = 10 * time.Millisecond
	// timingMinPackets: below this many forwarded packets the 99th
	// percentile is one or two packets and is not judged (likewise a
	// single cell's).
	timingMinPackets = 200
)

// ErrTimingBound: the emulator's timing error exceeded TimingRefuseP99
// while several cells ran at once.
var ErrTimingBound = errors.New("link emulator timing error above the hard bound")

// TimingGuard collects the emulator's timing error of every cell's network
// (LinkFabric reports each network when it is closed) and judges it
// against the bounds. Safe for concurrent use.
type TimingGuard struct {
	// Warn and Refuse override TimingWarnP99 and TimingRefuseP99 when
	// positive (tests).
	Warn, Refuse time.Duration

	mu      sync.Mutex
	cells   int   // networks reported
	judged  int   // with at least timingMinPackets packets
	packets int64 // forwarded packets of all networks
	p99s    []time.Duration
	max     time.Duration
	hist    map[int64]int64 // power-of-two buckets (upper bound in µs) over all cells
	loads   []float64       // 1-minute load averages sampled at cell ends
	loadEnd string

	// ProbeEvery, when positive, runs a probe while the campaign runs: an
	// ordinary timer of this period whose lateness stands for the
	// scheduling delay of the node processes.
	ProbeEvery time.Duration
	// ProbeThread, when set, is called by the probe on its own locked OS
	// thread before it starts (to keep that thread at normal priority
	// when the rest of the process runs real-time).
	ProbeThread func()
	host        map[int64]int64 // probe lateness, power-of-two buckets (µs)
	hostN       int64
	hostMax     time.Duration
}

// startProbe starts the host timer probe (when ProbeEvery is set) and
// returns the function that stops it and waits for it.
func (g *TimingGuard) startProbe() (stop func()) {
	if g == nil || g.ProbeEvery <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if g.ProbeThread != nil {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			g.ProbeThread()
		}
		t := time.NewTimer(g.ProbeEvery)
		defer t.Stop()
		want := time.Now().Add(g.ProbeEvery)
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				g.recordHost(now.Sub(want))
				want = time.Now().Add(g.ProbeEvery)
				t.Reset(g.ProbeEvery)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (g *TimingGuard) recordHost(late time.Duration) {
	late = max(late, 0)
	ub := int64(1)
	for time.Duration(ub)*time.Microsecond <= late && ub < 1<<40 {
		ub *= 2
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.host == nil {
		g.host = map[int64]int64{}
	}
	g.host[ub]++
	g.hostN++
	g.hostMax = max(g.hostMax, late)
}

func (g *TimingGuard) bounds() (warn, refuse time.Duration) {
	warn, refuse = TimingWarnP99, TimingRefuseP99
	if g.Warn > 0 {
		warn = g.Warn
	}
	if g.Refuse > 0 {
		refuse = g.Refuse
	}
	return warn, refuse
}

// Record adds one network's lateness summary.
func (g *TimingGuard) Record(s link.DelaySummary) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cells++
	g.packets += s.N
	g.max = max(g.max, s.Max)
	if s.N >= timingMinPackets {
		g.judged++
		g.p99s = append(g.p99s, s.P99)
	}
	if g.hist == nil {
		g.hist = map[int64]int64{}
	}
	for _, b := range s.Hist {
		g.hist[b.UpperUS] += b.N
	}
}

// sampleLoad records the 1-minute load average now.
func (g *TimingGuard) sampleLoad() {
	if g == nil {
		return
	}
	la := loadavg()
	f, _ := strconv.ParseFloat(strings.Fields(la + " 0")[0], 64)
	g.mu.Lock()
	g.loads = append(g.loads, f)
	g.loadEnd = la
	g.mu.Unlock()
}

// TimingReport is the manifest's record of the emulator's timing error
// and the host load while the campaign's cells ran.
type TimingReport = records.EmulatorTiming

// Timing status values.
const (
	TimingOK      = "ok"
	TimingWarn    = "warn"
	TimingRefused = "refused"
)

// Report summarises what was recorded, judged for jobs cells at once.
func (g *TimingGuard) Report(jobs int) TimingReport {
	warn, refuse := g.bounds()
	r := TimingReport{Jobs: jobs, WarnP99: warn, RefuseP99: refuse, Status: TimingOK}
	if g == nil {
		return r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.Cells, r.Judged, r.Pkts, r.Max = g.cells, g.judged, g.packets, g.max
	r.CellP99s = slices.Clone(g.p99s)
	for ub, n := range g.hist {
		r.Hist = append(r.Hist, records.TimingBucket{UpperUS: ub, N: n})
	}
	for _, l := range g.loads {
		r.LoadavgMax1 = max(r.LoadavgMax1, l)
	}
	r.LoadavgEnd = g.loadEnd
	for ub, n := range g.host {
		r.HostHist = append(r.HostHist, records.TimingBucket{UpperUS: ub, N: n})
	}
	r.HostMax, r.HostSamples = g.hostMax, g.hostN
	judgeTiming(&r)
	return r
}

// judgeTiming computes r's percentiles from its histograms and per-cell
// figures and judges them against r's bounds.
func judgeTiming(r *TimingReport) {
	timingPercentiles(r)
	timingStatus(r)
}

// timingPercentiles computes r's percentiles from its histograms and
// per-cell figures.
func timingPercentiles(r *TimingReport) {
	sortBuckets := func(h []records.TimingBucket) {
		slices.SortFunc(h, func(a, b records.TimingBucket) int { return int(a.UpperUS - b.UpperUS) })
	}
	sortBuckets(r.Hist)
	sortBuckets(r.HostHist)
	slices.Sort(r.CellP99s)
	// Figures without their histogram (records written before the
	// histograms were kept) stay as they were.
	if n := len(r.CellP99s); n > 0 {
		r.CellP99Median, r.CellP99Worst = r.CellP99s[n/2], r.CellP99s[n-1]
	}
	if len(r.Hist) > 0 {
		r.P99 = 0
		if r.Pkts >= timingMinPackets {
			r.P99 = histQuantile(r.Hist, 0.99)
		}
	}
	if len(r.HostHist) > 0 {
		r.HostP99 = histQuantile(r.HostHist, 0.99)
	}
}

// timingStatus judges r's percentiles against its bounds.
func timingStatus(r *TimingReport) {
	judged := r.P99
	if r.HostSamples >= timingMinPackets {
		judged = max(judged, r.HostP99)
	}
	switch {
	case judged > r.RefuseP99 && r.Jobs > 1:
		r.Status = TimingRefused
	case judged > r.WarnP99:
		r.Status = TimingWarn
	default:
		r.Status = TimingOK
	}
}

// CombineTiming joins the timing records of several runs of one campaign
// (a resumed run and the runs before it, or the shards of a merged
// campaign) into one, as if one guard had seen every cell: histograms and
// counts add up, percentiles are computed again from them, Jobs and the
// maxima are the largest of the runs, and the status is judged again on
// the combined figures (the late packets of a refused run are in them;
// refused only when the last run was). Records written before histograms of the probe and
// per-cell figures were kept (no host_hist, no cell_p99s_ns) contribute
// what they have. Nil entries are skipped; nil when all are.
func CombineTiming(rs ...*TimingReport) *TimingReport {
	var out, last *TimingReport
	var oldHostP99 time.Duration
	for _, r := range rs {
		if r == nil {
			continue
		}
		last = r
		runs := max(r.Runs, 1)
		if out == nil {
			c := *r
			c.Hist, c.HostHist, c.CellP99s = slices.Clone(r.Hist), slices.Clone(r.HostHist), slices.Clone(r.CellP99s)
			if len(c.CellP99s) == 0 && r.CellP99Worst > 0 {
				c.CellP99s = []time.Duration{r.CellP99Worst}
			}
			c.Runs = runs
			if len(r.HostHist) == 0 {
				oldHostP99 = r.HostP99
			}
			out = &c
			continue
		}
		out.Runs += runs
		out.Jobs = max(out.Jobs, r.Jobs)
		out.Cells += r.Cells
		out.Judged += r.Judged
		out.Pkts += r.Pkts
		out.Max = max(out.Max, r.Max)
		out.HostMax = max(out.HostMax, r.HostMax)
		if len(r.HostHist) == 0 {
			oldHostP99 = max(oldHostP99, r.HostP99) // an old record: no histogram to add
		}
		out.HostSamples += r.HostSamples
		out.Hist = addBuckets(out.Hist, r.Hist)
		out.HostHist = addBuckets(out.HostHist, r.HostHist)
		if len(r.CellP99s) > 0 {
			out.CellP99s = append(out.CellP99s, r.CellP99s...)
		} else if r.CellP99Worst > 0 {
			out.CellP99s = append(out.CellP99s, r.CellP99Worst)
		}
		out.WarnP99, out.RefuseP99 = max(out.WarnP99, r.WarnP99), max(out.RefuseP99, r.RefuseP99)
		out.LoadavgMax1 = max(out.LoadavgMax1, r.LoadavgMax1)
		if r.LoadavgEnd != "" {
			out.LoadavgEnd = r.LoadavgEnd
		}
	}
	if out != nil {
		timingPercentiles(out)
		out.HostP99 = max(out.HostP99, oldHostP99)
		timingStatus(out)
		if out.Status == TimingRefused && last.Status != TimingRefused {
			// Refused means the campaign stopped; the last run went on
			// to the end (with fewer jobs): the figures warn.
			out.Status = TimingWarn
		}
	}
	return out
}

// addBuckets adds histogram b into a (same bucket bounds add up).
func addBuckets(a, b []records.TimingBucket) []records.TimingBucket {
	for _, x := range b {
		i := slices.IndexFunc(a, func(y records.TimingBucket) bool { return y.UpperUS == x.UpperUS })
		if i < 0 {
			a = append(a, x)
			continue
		}
		a[i].N += x.N
	}
	return a
}

// histQuantile interpolates the q-quantile in power-of-two buckets
// (bucket UpperUS holds [UpperUS/2, UpperUS) microseconds).
func histQuantile(h []records.TimingBucket, q float64) time.Duration {
	var total int64
	for _, b := range h {
		total += b.N
	}
	target := q * float64(total)
	var cum float64
	for _, b := range h {
		if b.N == 0 {
			continue
		}
		if cum+float64(b.N) >= target {
			lo := float64(b.UpperUS / 2)
			us := lo + (float64(b.UpperUS)-lo)*(target-cum)/float64(b.N)
			return time.Duration(us * float64(time.Microsecond))
		}
		cum += float64(b.N)
	}
	return 0
}

// explainTiming says in one sentence what a warn or refused report means.
func explainTiming(r TimingReport) string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }
	worst := ""
	if r.CellP99Worst > 0 {
		worst = "; worst cell " + ms(r.CellP99Worst)
	}
	what := fmt.Sprintf("the link emulator forwarded packets %s late at the 99th percentile", ms(r.P99))
	if r.HostSamples >= timingMinPackets && r.HostP99 > r.P99 {
		what = fmt.Sprintf("ordinary processes (broker, pub, sub) woke %s late at the 99th percentile (the emulator: %s)", ms(r.HostP99), ms(r.P99))
	}
	switch r.Status {
	case TimingRefused:
		return fmt.Sprintf("with %d cells at once %s (hard bound %s%s; load average up to %.1f): delays are no longer the links' own",
			r.Jobs, what, ms(r.RefuseP99), worst, r.LoadavgMax1)
	case TimingWarn:
		return fmt.Sprintf("%s (warn bound %s%s; %d cells at once, load average up to %.1f); delays may be inflated by about that much",
			what, ms(r.WarnP99), worst, r.Jobs, r.LoadavgMax1)
	}
	return ""
}

// EstimateWall estimates the wall time of running cells with jobs cells at
// once: each cell goes to the first free slot, in campaign order (as Run
// does), and takes its estimate.
func EstimateWall(cells []Cell, jobs int) time.Duration {
	jobs = max(jobs, 1)
	free := make([]time.Duration, jobs) // when each slot is free again
	for _, c := range cells {
		i := 0
		for j := range free {
			if free[j] < free[i] {
				i = j
			}
		}
		free[i] += estimate(c)
	}
	return slices.Max(free)
}

// FormatWall prints a duration for humans: "45s", "12m", "3h05m".
func FormatWall(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Round(time.Minute)/time.Minute))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
