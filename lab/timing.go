package lab

import (
	"context"
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

// Bounds on a campaign's timing error, judged at the 99th percentile of
// three measurements pooled over every cell of the run: the link
// emulator's lateness (write time minus the model's departure time, every
// forwarded packet), the host probe's (how late an ordinary timer of the
// lab process woke: the scheduling delay of the node processes) and the
// publishers' send lateness (send time minus each paced message's due
// time). The largest decides: above TimingWarnP99 the campaign warns
// (status warn) and the admission control lets fewer cells run at once;
// above TimingRefuseP99 the results are no evidence (status fail).
const (
	TimingWarnP99   = time.Millisecond
	TimingRefuseP99 = 10 * time.Millisecond
	// timingMinPackets: below this many samples the 99th percentile is
	// one or two of them and is not judged (likewise a single cell's).
	timingMinPackets = 200
	// cellMinSamples: a cell's own send and probe figures are judged from
	// this many samples on.
	cellMinSamples = 100
	// DefaultCalibration is how long the probe measures the idle host
	// before the first cell starts.
	DefaultCalibration = 2 * time.Second
	// DefaultAdmitWindow is the admission control's evaluation window.
	DefaultAdmitWindow = 2 * time.Second
)

// ErrTimingBound: the host's timing error exceeded the bounds: the idle
// calibration refused to start, or the campaign's guard failed.
var ErrTimingBound = errors.New("timing error above the hard bound")

// TimingGuard measures a campaign's timing error and judges it: the link
// emulator's lateness of every cell's network (LinkFabric reports each
// network when it is closed), the publishers' send lateness of every cell
// (the runner's CellSummary), and, with ProbeEvery, a host probe running
// beside the cells. Run uses it for admission control: how many cells
// may run at once (docs/lab.md, "Parallel cells"). Safe for concurrent
// use.
type TimingGuard struct {
	// Warn and Refuse override TimingWarnP99 and TimingRefuseP99 when
	// positive (tests).
	Warn, Refuse time.Duration
	// ProbeEvery, when positive, runs a probe while the campaign runs: an
	// ordinary timer of this period whose lateness, taken when its
	// goroutine runs again, stands for the scheduling delay of the node
	// processes.
	ProbeEvery time.Duration
	// ProbeCommand, when set, runs the probe as a child process of its
	// own (a program running ProbeLoop, e.g. `iotq lab probe --every
	// 10ms`), scheduled like the node processes; otherwise the probe is a
	// goroutine of this process.
	ProbeCommand []string
	// ProbeThread, when set, is called by an in-process probe on its own
	// locked OS thread before it starts (to keep that thread at normal
	// priority when the rest of the process runs real-time).
	ProbeThread func()
	// Calibrate is how long the probe measures the idle host before the
	// first cell (with ProbeEvery): 0 means DefaultCalibration, negative
	// none.
	Calibrate time.Duration
	// Window is the admission control's evaluation window; 0 means
	// DefaultAdmitWindow.
	Window time.Duration

	mu      sync.Mutex
	cells   int   // networks reported
	judged  int   // with at least timingMinPackets packets
	packets int64 // forwarded packets of all networks
	p99s    []time.Duration
	max     time.Duration
	hist    latHist   // emulator lateness over all cells
	loads   []float64 // 1-minute load averages sampled at cell ends
	loadEnd string
	// cpuFirst and cpuLast are /proc/stat's CPU times at the first and
	// the latest load sample (cpuOK once the first was read).
	cpuFirst, cpuLast cpuTimes
	cpuOK             bool
	winCPU            cpuTimes // at the admission window's start

	host    latHist // probe lateness while the cells ran
	hostN   int64
	hostMax time.Duration
	send    latHist // the publishers' send lateness over all cells
	sendN   int64
	sendMax time.Duration
	sendP99 []time.Duration // per cell, cells with cellMinSamples
	idle    records.Lateness
	// win pools the probe's samples and the cells' reports since winStart:
	// what the admission control judges.
	win      latHist
	winMax   time.Duration // caps the window's interpolated percentile
	winStart time.Time
	jobsRun  int
	steps    []records.AdmissionStep
	// admitRef is the admission control's reference: the lateness while
	// one cell ran (0: not yet measured).
	admitRef time.Duration
	// hostProbeName records where the probe ran (hostProbe), set when
	// the calibration or the campaign's probe starts.
	hostProbeName string
}

// latHist counts lateness in power-of-two buckets of microseconds, keyed
// by the bucket's upper bound (records.TimingBucket).
type latHist map[int64]int64

// latBucket returns the upper bound (µs) of late's bucket.
func latBucket(late time.Duration) int64 {
	ub := int64(1)
	for time.Duration(ub)*time.Microsecond <= late && ub < 1<<40 {
		ub *= 2
	}
	return ub
}

func (h latHist) add(late time.Duration) { h[latBucket(max(late, 0))]++ }

func (h latHist) addBuckets(b []records.TimingBucket) {
	for _, x := range b {
		h[x.UpperUS] += x.N
	}
}

func (h latHist) n() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// buckets returns h sorted by bucket.
func (h latHist) buckets() []records.TimingBucket {
	var out []records.TimingBucket
	for ub, n := range h {
		out = append(out, records.TimingBucket{UpperUS: ub, N: n})
	}
	sortBuckets(out)
	return out
}

func sortBuckets(h []records.TimingBucket) {
	slices.SortFunc(h, func(a, b records.TimingBucket) int { return int(a.UpperUS - b.UpperUS) })
}

// summarizeLateness returns the exact percentiles of samples and their
// histogram; nil when there are none.
func summarizeLateness(samples []time.Duration) *records.Lateness {
	if len(samples) == 0 {
		return nil
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	h := latHist{}
	for _, d := range s {
		h.add(d)
	}
	return &records.Lateness{N: int64(len(s)), P50: rank(0.5), P99: rank(0.99), Max: max(s[len(s)-1], 0), Hist: h.buckets()}
}

// histLateness summarises a histogram (percentiles interpolated in its
// buckets) with its largest sample max; nil when it is empty.
func histLateness(h latHist, largest time.Duration) *records.Lateness {
	if h.n() == 0 {
		return nil
	}
	b := h.buckets()
	return &records.Lateness{N: h.n(), P50: capAt(histQuantile(b, 0.5), largest), P99: capAt(histQuantile(b, 0.99), largest), Max: largest, Hist: b}
}

// capAt caps a percentile interpolated within a power-of-two bucket at
// the largest sample, when that is known (> 0): all samples of a bucket
// may lie in its lower part.
func capAt(p, largest time.Duration) time.Duration {
	if largest > 0 {
		return min(p, largest)
	}
	return p
}

// startProbe starts the host timer probe (when ProbeEvery is set) and
// returns the function that stops it and waits for it; stop reports a
// probe process that ended early.
func (g *TimingGuard) startProbe() (stop func() error, err error) {
	if g == nil || g.ProbeEvery <= 0 {
		return func() error { return nil }, nil
	}
	return g.probe(g.recordHost)
}

// probe runs the probe, in a child process with ProbeCommand, else on a
// goroutine, passing record each lateness.
func (g *TimingGuard) probe(record func(time.Duration)) (stop func() error, err error) {
	g.mu.Lock()
	g.hostProbeName = g.hostProbe()
	g.mu.Unlock()
	if len(g.ProbeCommand) > 0 {
		return startProbeProcess(g.ProbeCommand, record)
	}
	s := runProbe(g.ProbeEvery, g.ProbeThread, record)
	return func() error { s(); return nil }, nil
}

// HostProbe says where the host probe runs: "process" (ProbeCommand),
// "in-process", or "" without a probe.
func (g *TimingGuard) hostProbe() string {
	switch {
	case g == nil || g.ProbeEvery <= 0:
		return ""
	case len(g.ProbeCommand) > 0:
		return records.HostProbeProcess
	}
	return records.HostProbeInProcess
}

// runProbe runs an ordinary timer of period every on its own goroutine
// (on a locked OS thread prepared by thread, when set) and passes record
// how late each wake-up was. It returns the function that stops it and
// waits for it.
func runProbe(every time.Duration, thread func(), record func(time.Duration)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if thread != nil {
			// Never unlocked: the thread dies with this goroutine. Back in
			// the runtime's pool, a thread kept at normal priority would
			// run other goroutines of this real-time process (the
			// calibration's probe ends before the cells start).
			runtime.LockOSThread()
			thread()
		}
		t := time.NewTimer(every)
		defer t.Stop()
		want := time.Now().Add(every)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				// The time received is when the timer was due (the
				// runtime back-dates it), not when this goroutine ran:
				// the wake-up delay is only seen on the clock, now.
				record(time.Since(want))
				want = time.Now().Add(every)
				t.Reset(every)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (g *TimingGuard) recordHost(late time.Duration) {
	late = max(late, 0)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.host == nil {
		g.host = latHist{}
	}
	g.host.add(late)
	g.hostN++
	g.hostMax = max(g.hostMax, late)
	g.winAdd(late, func(w latHist) { w.add(late) })
}

// winAdd adds to the admission window samples whose largest is largest;
// g.mu is held.
func (g *TimingGuard) winAdd(largest time.Duration, f func(latHist)) {
	if g.win == nil {
		g.win = latHist{}
	}
	f(g.win)
	g.winMax = max(g.winMax, largest)
}

func (g *TimingGuard) bounds() (warn, refuse time.Duration) {
	warn, refuse = TimingWarnP99, TimingRefuseP99
	if g == nil {
		return warn, refuse
	}
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
		g.hist = latHist{}
	}
	for _, b := range s.Hist {
		g.hist[b.UpperUS] += b.N
	}
	g.winAdd(s.Max, func(w latHist) {
		for _, b := range s.Hist {
			w[b.UpperUS] += b.N
		}
	})
}

// RecordSend adds one cell's send lateness (nil: the cell paced no
// message).
func (g *TimingGuard) RecordSend(l *records.Lateness) {
	if g == nil || l == nil || l.N == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.send == nil {
		g.send = latHist{}
	}
	g.send.addBuckets(l.Hist)
	g.sendN += l.N
	g.sendMax = max(g.sendMax, l.Max)
	if l.N >= cellMinSamples {
		g.sendP99 = append(g.sendP99, l.P99)
	}
	g.winAdd(l.Max, func(w latHist) { w.addBuckets(l.Hist) })
}

// hostMark is a copy of the probe's histogram, for hostSince.
type hostMark struct {
	hist latHist
}

// markHost returns the probe's figures so far.
func (g *TimingGuard) markHost() hostMark {
	if g == nil {
		return hostMark{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := hostMark{hist: latHist{}}
	for ub, n := range g.host {
		m.hist[ub] = n
	}
	return m
}

// hostSince returns the probe's lateness since m (interpolated
// percentiles; Max is the largest bucket's bound, the exact maximum
// of the interval is not kept); nil without samples.
func (g *TimingGuard) hostSince(m hostMark) *records.Lateness {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	d := latHist{}
	var top int64
	for ub, n := range g.host {
		if n -= m.hist[ub]; n > 0 {
			d[ub] = n
			top = max(top, ub)
		}
	}
	return histLateness(d, min(time.Duration(top)*time.Microsecond, g.hostMax))
}

// window returns the admission window: its samples, their 99th
// percentile and when it began.
func (g *TimingGuard) window() (n int64, p99 time.Duration, start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n = g.win.n()
	if n > 0 {
		p99 = min(histQuantile(g.win.buckets(), 0.99), g.winMax)
	}
	return n, p99, g.winStart
}

// resetWindow starts a new admission window at now.
func (g *TimingGuard) resetWindow(now time.Time) {
	ct, _ := readCPUTimes()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.win, g.winMax, g.winStart, g.winCPU = latHist{}, 0, now, ct
}

// windowSteal is the share of the CPUs' time, in per cent, the hypervisor
// took since the admission window began; ok is false when unknown.
func (g *TimingGuard) windowSteal() (pct float64, ok bool) {
	ct, ok := readCPUTimes()
	g.mu.Lock()
	start := g.winCPU
	g.mu.Unlock()
	d := ct.total - start.total
	if !ok || start.total == 0 || d <= 0 {
		return 0, false
	}
	return 100 * float64(ct.steal-start.steal) / float64(d), true
}

// noteRunning records how many cells run at once.
func (g *TimingGuard) noteRunning(n int) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.jobsRun = max(g.jobsRun, n)
	g.mu.Unlock()
}

// setAdmitRef records the admission control's reference lateness.
func (g *TimingGuard) setAdmitRef(d time.Duration) {
	g.mu.Lock()
	g.admitRef = d
	g.mu.Unlock()
}

func (g *TimingGuard) addStep(s records.AdmissionStep) {
	g.mu.Lock()
	g.steps = append(g.steps, s)
	g.mu.Unlock()
}

// calibrate runs the probe for the calibration time on the host before
// any cell runs and records its lateness; nil when it does not run (no
// probe, calibration off) or ctx ended first.
func (g *TimingGuard) calibrate(ctx context.Context) (*records.Lateness, error) {
	if g == nil || g.ProbeEvery <= 0 || g.Calibrate < 0 {
		return nil, nil
	}
	d := g.Calibrate
	if d == 0 {
		d = DefaultCalibration
	}
	var mu sync.Mutex
	var samples []time.Duration
	stop, err := g.probe(func(late time.Duration) {
		mu.Lock()
		samples = append(samples, late)
		mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("timing guard: the host probe could not start: %w", err)
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	if err := stop(); err != nil {
		return nil, fmt.Errorf("timing guard: the host probe failed in the calibration: %w", err)
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	mu.Lock()
	l := summarizeLateness(samples)
	mu.Unlock()
	if l == nil {
		return nil, errors.New("timing guard: the host probe reported nothing in the calibration")
	}
	g.mu.Lock()
	g.idle = *l
	g.mu.Unlock()
	return l, nil
}

// sampleLoad records the 1-minute load average now.
func (g *TimingGuard) sampleLoad() {
	if g == nil {
		return
	}
	la := loadavg()
	f, _ := strconv.ParseFloat(strings.Fields(la + " 0")[0], 64)
	ct, ctOK := readCPUTimes()
	g.mu.Lock()
	g.loads = append(g.loads, f)
	g.loadEnd = la
	if ctOK {
		if !g.cpuOK {
			g.cpuFirst, g.cpuOK = ct, true
		}
		g.cpuLast = ct
	}
	g.mu.Unlock()
}

// TimingReport is the manifest's record of the timing error and the host
// load while the campaign's cells ran.
type TimingReport = records.EmulatorTiming

// Timing status values (records.TimingStatus*).
const (
	TimingOK   = records.TimingStatusOK
	TimingWarn = records.TimingStatusWarn
	TimingFail = records.TimingStatusFail
	// TimingRefused is what records before version 4 say for a run that
	// stopped above the hard bound; it counts as TimingFail.
	TimingRefused = records.TimingStatusRefused
)

// Report summarises what was recorded; jobs is how many cells were asked
// to run at once.
func (g *TimingGuard) Report(jobs int) TimingReport {
	warn, refuse := g.bounds()
	r := TimingReport{Jobs: jobs, WarnP99: warn, RefuseP99: refuse, Status: TimingOK}
	if g == nil {
		return r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.JobsRun = g.jobsRun
	r.Cells, r.Judged, r.Pkts, r.Max = g.cells, g.judged, g.packets, g.max
	r.CellP99s = slices.Clone(g.p99s)
	r.Hist = g.hist.buckets()
	for _, l := range g.loads {
		r.LoadavgMax1 = max(r.LoadavgMax1, l)
	}
	r.LoadavgEnd = g.loadEnd
	if g.cpuOK {
		r.CPUTicks = g.cpuLast.total - g.cpuFirst.total
		r.StealTicks = g.cpuLast.steal - g.cpuFirst.steal
	}
	r.HostHist = g.host.buckets()
	r.HostMax, r.HostSamples = g.hostMax, g.hostN
	r.Send = histLateness(g.send, g.sendMax)
	if len(g.sendP99) > 0 {
		r.SendCellP99Worst = slices.Max(g.sendP99)
	}
	r.IdleP99, r.IdleSamples = g.idle.P99, g.idle.N
	r.Admission = slices.Clone(g.steps)
	r.HostProbe = g.hostProbeName
	r.AdmitReference = g.admitRef
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
			r.P99 = capAt(histQuantile(r.Hist, 0.99), r.Max)
		}
	}
	if len(r.HostHist) > 0 {
		r.HostP99 = capAt(histQuantile(r.HostHist, 0.99), r.HostMax)
	}
	if r.Send != nil && len(r.Send.Hist) > 0 {
		sortBuckets(r.Send.Hist)
		r.Send.P50, r.Send.P99 = capAt(histQuantile(r.Send.Hist, 0.5), r.Send.Max), capAt(histQuantile(r.Send.Hist, 0.99), r.Send.Max)
	}
}

// judgedP99 is the figure the guard judges: the largest 99th percentile
// with enough samples, and what it measured.
func judgedP99(r *TimingReport) (time.Duration, string) {
	d, what := r.P99, "emulator"
	if r.HostSamples >= timingMinPackets && r.HostP99 > d {
		d, what = r.HostP99, "host"
	}
	if r.Send != nil && r.Send.N >= timingMinPackets && r.Send.P99 > d {
		d, what = r.Send.P99, "send"
	}
	return d, what
}

// timingStatus judges r's percentiles against its bounds.
func timingStatus(r *TimingReport) {
	judged, _ := judgedP99(r)
	switch {
	case judged > r.RefuseP99:
		r.Status = TimingFail
	case judged > r.WarnP99:
		r.Status = TimingWarn
	default:
		r.Status = TimingOK
	}
	r.Note = explainTiming(*r)
}

// cellTiming is a cell's timing record, judged against the bounds.
func (g *TimingGuard) cellTiming(send, host *records.Lateness) *records.CellTiming {
	if send == nil && host == nil {
		return nil
	}
	warn, refuse := g.bounds()
	ct := &records.CellTiming{Send: send, Host: host, Status: TimingOK}
	var judged time.Duration
	for _, l := range []*records.Lateness{send, host} {
		if l != nil && l.N >= cellMinSamples {
			judged = max(judged, l.P99)
		}
	}
	switch {
	case judged > refuse:
		ct.Status = TimingFail
	case judged > warn:
		ct.Status = TimingWarn
	}
	return ct
}

// CombineTiming joins the timing records of several runs of one campaign
// (a resumed run and the runs before it, or the shards of a merged
// campaign) into one, as if one guard had seen every cell: histograms and
// counts add up, percentiles are computed again from them, Jobs, JobsRun
// and the maxima are the largest of the runs, admission steps follow one
// another, and the status is judged again on the combined figures (a
// failed run's late samples are in them). Records written before
// histograms of the probe and per-cell figures were kept (no host_hist,
// no cell_p99s_ns) contribute what they have. Nil entries are skipped;
// nil when all are.
func CombineTiming(rs ...*TimingReport) *TimingReport {
	var out *TimingReport
	var oldHostP99 time.Duration
	for _, r := range rs {
		if r == nil {
			continue
		}
		runs := max(r.Runs, 1)
		if out == nil {
			c := *r
			c.Hist, c.HostHist, c.CellP99s = slices.Clone(r.Hist), slices.Clone(r.HostHist), slices.Clone(r.CellP99s)
			c.Admission = slices.Clone(r.Admission)
			if r.Send != nil {
				s := *r.Send
				s.Hist = slices.Clone(r.Send.Hist)
				c.Send = &s
			}
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
		out.JobsRun = max(out.JobsRun, r.JobsRun)
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
		if r.Send != nil {
			if out.Send == nil {
				out.Send = &records.Lateness{}
			}
			out.Send.N += r.Send.N
			out.Send.Max = max(out.Send.Max, r.Send.Max)
			out.Send.Hist = addBuckets(out.Send.Hist, r.Send.Hist)
		}
		out.SendCellP99Worst = max(out.SendCellP99Worst, r.SendCellP99Worst)
		out.IdleP99 = max(out.IdleP99, r.IdleP99)
		out.IdleSamples += r.IdleSamples
		out.AdmitReference = max(out.AdmitReference, r.AdmitReference)
		switch {
		case out.HostProbe == "":
			out.HostProbe = r.HostProbe
		case r.HostProbe != "" && r.HostProbe != out.HostProbe:
			out.HostProbe = records.HostProbeMixed
		}
		out.Admission = append(out.Admission, r.Admission...)
		if len(r.CellP99s) > 0 {
			out.CellP99s = append(out.CellP99s, r.CellP99s...)
		} else if r.CellP99Worst > 0 {
			out.CellP99s = append(out.CellP99s, r.CellP99Worst)
		}
		out.WarnP99, out.RefuseP99 = max(out.WarnP99, r.WarnP99), max(out.RefuseP99, r.RefuseP99)
		out.LoadavgMax1 = max(out.LoadavgMax1, r.LoadavgMax1)
		out.CPUTicks += r.CPUTicks
		out.StealTicks += r.StealTicks
		if r.LoadavgEnd != "" {
			out.LoadavgEnd = r.LoadavgEnd
		}
	}
	if out != nil {
		timingPercentiles(out)
		out.HostP99 = max(out.HostP99, oldHostP99)
		timingStatus(out)
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

// fmtMs prints a duration in milliseconds with two decimals.
func fmtMs(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

// probeWords names where the host probe ran, for the note.
func probeWords(where string) string {
	switch where {
	case records.HostProbeProcess:
		return "the probe process"
	case records.HostProbeMixed:
		return "the probe, in the lab process in some runs and a process of its own in others"
	}
	return "the probe inside the lab process"
}

// explainTiming says in one sentence what a warn or fail report means;
// "" when it is ok.
func explainTiming(r TimingReport) string {
	if r.Status == TimingOK || r.Status == "" {
		return ""
	}
	worst := ""
	if r.CellP99Worst > 0 {
		worst = "; worst cell's emulator " + fmtMs(r.CellP99Worst)
	}
	judged, which := judgedP99(&r)
	var what string
	switch which {
	case "host":
		what = fmt.Sprintf("ordinary processes (broker, pub, sub) woke %s late at the 99th percentile (%s; the emulator: %s)", fmtMs(judged), probeWords(r.HostProbe), fmtMs(r.P99))
	case "send":
		what = fmt.Sprintf("the publishers sent their paced messages %s late at the 99th percentile (the emulator: %s)", fmtMs(judged), fmtMs(r.P99))
	default:
		what = fmt.Sprintf("the link emulator forwarded packets %s late at the 99th percentile", fmtMs(judged))
	}
	n := r.JobsRun
	if n == 0 { // records before the admission control
		n = r.Jobs
	}
	jobs := cellsWord(max(n, 1)) + " at once"
	steal := ""
	if pct, ok := r.StealPct(); ok {
		steal = fmt.Sprintf(", the hypervisor took %.1f %% of the CPUs' time (steal)", pct)
	}
	switch r.Status {
	case TimingFail, TimingRefused:
		return fmt.Sprintf("%s (fail bound %s%s; at most %s, load average up to %.1f%s): the measured delays are not the links' own, so these results are no evidence",
			what, fmtMs(r.RefuseP99), worst, jobs, r.LoadavgMax1, steal)
	default:
		return fmt.Sprintf("%s (warn bound %s%s; at most %s, load average up to %.1f%s); delays may be inflated by about that much",
			what, fmtMs(r.WarnP99), worst, jobs, r.LoadavgMax1, steal)
	}
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
