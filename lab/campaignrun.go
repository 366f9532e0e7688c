package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/iotq/iotq/records"
)

// Run runs the cells of specs (already scaled) into opts.Dir, opts.Jobs at
// a time. A failed cell is recorded and the campaign goes on; when ctx is
// cancelled the running cells are abandoned (no done marker), the
// aggregate files are rebuilt from the completed cells and Run returns
// with Result.Interrupted set and ctx's error. When the timing guard
// refuses to start (the idle host is already too late), Run returns
// ErrTimingBound before touching the directory; when its figures end above
// the fail bound, every file is written, the manifest says fail and Run
// returns ErrTimingBound.
//
// Its steps: check the options and resolve the cells (newCampaignRun); let
// the timing guard calibrate (admit); write the directory's identity and
// manifest (prepare); start cells while the admission allows and record
// each as it ends (schedule, record); wait for the running ones (drain);
// rebuild the aggregates and write the final manifest (end).
func Run(ctx context.Context, specs []Spec, opts Options) (Result, error) {
	r, err := newCampaignRun(specs, opts)
	if err != nil {
		return Result{}, err
	}
	if err := r.admit(ctx); err != nil {
		return r.res, err
	}
	if err := r.prepare(ctx, specs); err != nil {
		return r.res, err
	}
	// Cells run in goroutines, at most the admitted number at once; this
	// goroutine alone writes done markers, the progress bar and the
	// aggregates.
	cctx, cancelCells := context.WithCancel(ctx)
	defer cancelCells()
	r.cellsDone = cctx.Done()
	stopProbe, err := r.opts.Timing.startProbe()
	if err != nil {
		return r.res, fmt.Errorf("timing guard: the host probe could not start: %w", err)
	}
	defer r.stopProbe(stopProbe)
	fatal := r.schedule(ctx, cctx)
	if fatal != nil {
		cancelCells()
	}
	tick, stopTick := r.ticker()
	defer stopTick()
	cancelled := r.cellsDone
	for r.running > 0 || len(r.waiting) > 0 {
		if err := r.await(ctx, cctx, tick, &cancelled); err != nil && fatal == nil {
			fatal = err
			cancelCells()
		}
	}
	if fatal != nil {
		return r.res, fatal
	}
	return r.res, r.end()
}

// campaignRun is one call of Run: its options and cells, and what it keeps
// while the cells run. Only Run's goroutine touches it; cell goroutines
// report on results.
type campaignRun struct {
	opts      Options
	runStart  time.Time // this run's start (a resumed campaign's manifest keeps the first's)
	log       *slog.Logger
	now       func() time.Time
	every     int // aggregate after this many finished cells
	jobs      int // cells at once asked for
	all, mine []Cell
	cf        campaignFile
	res       Result

	adm    *admission    // nil: no guard, jobs at once
	man    Manifest      // written at the start and at the end
	before *TimingReport // the emulator timing of the runs this one resumes
	pb     *progress

	results            chan cellOutcome
	running            int              // cells running a repetition (or setting up)
	gates              chan gateRequest // cells between two repetitions (repgate.go)
	waiting            []gateRequest    // their requests, not yet granted
	cellsDone          <-chan struct{}  // closed when the cells are cancelled
	sinceAgg           int
	warned, failWarned bool
	probeStopped       bool
	runErr             error // returned when nothing worse happens
}

// cellOutcome is what a cell's goroutine reports when the cell ends.
type cellOutcome struct {
	c          Cell
	dir        string
	start, end time.Time
	sum        CellSummary
	err        error
	host       hostMark // the probe's figures when the cell started
}

func newCampaignRun(specs []Spec, opts Options) (*campaignRun, error) {
	if opts.Dir == "" {
		return nil, errors.New("campaign: no results directory given")
	}
	if opts.Runner == nil {
		return nil, errors.New("campaign: no cell runner")
	}
	r := &campaignRun{opts: opts, log: opts.Logger, now: opts.Now, every: opts.AggregateEvery,
		jobs: max(opts.Jobs, 1), results: make(chan cellOutcome)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.every <= 0 {
		r.every = 10
	}
	if r.opts.Shards < 1 {
		r.opts.Shards = 1
	}
	if r.jobs > MaxJobs {
		return nil, fmt.Errorf("campaign: %d jobs: at most %d cells can run at once", r.jobs, MaxJobs)
	}
	// One request at most per cell that may run (never more than jobs).
	r.gates = make(chan gateRequest, r.jobs)
	if r.opts.Shard < 0 || r.opts.Shard >= r.opts.Shards {
		return nil, fmt.Errorf("campaign: shard %d of %d does not exist", r.opts.Shard+1, r.opts.Shards)
	}
	var err error
	if r.all, err = Cells(specs); err != nil {
		return nil, err
	}
	r.mine = Shard(r.all, r.opts.Shard, r.opts.Shards)
	r.cf = campaignFile{Scenario: opts.Scenario, Scale: opts.Scale, Shard: shardString(r.opts.Shard, r.opts.Shards)}
	for _, c := range r.all {
		r.cf.Cells = append(r.cf.Cells, c.ID)
	}
	for _, c := range r.mine {
		r.cf.Mine = append(r.cf.Mine, c.ID)
	}
	r.res = Result{Total: len(r.all), InShard: len(r.mine)}
	return r, nil
}

// admit lets the timing guard calibrate on the idle host and sets the
// admission control up; it refuses (ErrTimingBound) before the directory
// is touched when the host is already too late.
func (r *campaignRun) admit(ctx context.Context) error {
	if r.opts.Timing == nil {
		return nil
	}
	limit, fixed, msg, err := r.opts.Timing.admitStart(ctx, r.jobs)
	if err != nil {
		r.res.Interrupted = ctx.Err() != nil
		return err
	}
	if msg != "" {
		r.log.Info(msg)
		r.say("%s\n", msg)
	}
	r.adm = newAdmission(r.opts.Timing, r.jobs, limit, fixed, time.Now())
	return nil
}

// prepare writes the directory's identity (campaign.json), the resolved
// scenario and the manifest as the run starts; a resumed run keeps the
// original start and timing record.
func (r *campaignRun) prepare(ctx context.Context, specs []Spec) error {
	if err := prepareDir(r.opts, r.cf); err != nil {
		return err
	}
	if err := writeJSONAtomic(filepath.Join(r.opts.Dir, FileCampaign), r.cf); err != nil {
		return err
	}
	yml, err := MarshalSpecs(specs)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(r.opts.Dir, FileScenario), yml); err != nil {
		return err
	}
	r.man = newManifest(ctx, specs, r.all)
	r.man.Fabric, r.man.Scenario, r.man.Scale, r.man.Shard = r.opts.Fabric, r.opts.Scenario, r.opts.Scale, r.cf.Shard
	r.man.Start = r.now().UTC()
	r.man.StartNs = r.man.Start.UnixNano()
	r.runStart = r.man.Start
	if old, ok := readManifest(r.opts.Dir); ok && r.opts.Resume {
		// Keep the original start and the earlier runs' spans (a manifest
		// from before spans were recorded stands for one run, from its
		// start to its end); record this run's loads too.
		r.man.Start, r.man.StartNs = old.Start, old.StartNs
		r.man.RunSpans = old.RunSpans
		if len(old.RunSpans) == 0 && !old.Start.IsZero() && !old.End.IsZero() {
			r.man.RunSpans = []records.RunSpan{{Start: old.Start, End: old.End}}
		}
		r.before = old.EmulatorTiming
		r.man.EmulatorTiming = r.before
	}
	if err := writeJSONAtomic(filepath.Join(r.opts.Dir, FileManifest), r.man); err != nil {
		return err
	}
	r.pb = newProgress(r.opts.Progress, r.mine, r.now)
	if r.pb != nil {
		r.pb.jobs = r.jobs
	}
	r.opts.Timing.sampleLoad()
	return nil
}

// ticker ticks every quarter admission window while a timing guard
// probes the host (evaluate judges the window between cell events too);
// without one it never ticks.
func (r *campaignRun) ticker() (<-chan time.Time, func()) {
	if r.adm == nil || r.opts.Timing.ProbeEvery <= 0 {
		return nil, func() {}
	}
	tk := time.NewTicker(r.adm.window / 4)
	return tk.C, tk.Stop
}

// await waits for one event (a cell's end, a cell between two
// repetitions, a tick, or the cells' cancellation, which it sees once:
// *cancelled becomes nil), then lets the admission control judge the
// window and the waiting cells go on as it allows. It returns record's
// error.
func (r *campaignRun) await(ctx, cctx context.Context, tick <-chan time.Time, cancelled *<-chan struct{}) error {
	var err error
	select {
	case <-*cancelled:
		*cancelled = nil
		if ctx.Err() != nil && r.running+len(r.waiting) > 0 {
			r.say("\ninterrupted: ending the %s still running (a cell ended unfinished is run again by --resume); interrupt again to exit at once\n", cellsWord(r.running+len(r.waiting)))
		}
	case o := <-r.results:
		err = r.record(ctx, cctx, o)
	case req := <-r.gates:
		r.gate(req)
	case <-tick:
	}
	if !r.cancelled() {
		r.evaluate()
	}
	r.grantWaiting()
	return err
}

// limit is how many cells may run at once now.
func (r *campaignRun) limit() int {
	if r.adm == nil {
		return r.jobs
	}
	return r.adm.limit
}

// say writes a line for the operator when there is a progress writer.
func (r *campaignRun) say(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format, args...)
	}
}

// stopProbe stops the host probe once and says when it had failed.
func (r *campaignRun) stopProbe(stop func() error) {
	if r.probeStopped {
		return
	}
	r.probeStopped = true
	if err := stop(); err != nil {
		r.log.Error("timing guard: the host probe failed: the host samples end where it did", "error", err)
		r.say("timing guard: the host probe failed: %v\n", err)
	}
}

// evaluate lets the admission control judge the last window: after every
// cell's end and start and, while a cell waits for a slot, every quarter
// window.
func (r *campaignRun) evaluate() {
	if r.adm == nil {
		return
	}
	was := r.adm.limit
	st := r.adm.evaluate(time.Now(), r.running)
	if st == nil {
		return
	}
	r.log.Info("timing guard: cells at once", "limit", st.Limit, "requested", r.jobs, "running", st.Running, "p99", st.P99, "samples", st.N, "reason", st.Reason)
	if st.Limit < was {
		r.say("\ntiming guard: at most %s at once from now (--jobs %d): %s\n", cellsWord(st.Limit), r.jobs, st.Reason)
	}
}

// schedule starts the shard's pending cells as the admission allows,
// recording those that end meanwhile. It returns a fatal error (the
// directory cannot be written); an interruption is kept in res and runErr.
func (r *campaignRun) schedule(ctx, cctx context.Context) error {
	tick, stopTick := r.ticker()
	defer stopTick()
	var lastStart time.Time // of the last cell started, for StartGap
	for _, c := range r.mine {
		cellDir := filepath.Join(r.opts.Dir, DirCells, c.ID)
		d, ok, err := readDone(cellDir)
		if err != nil {
			return err
		}
		if ok && (d.Status == StatusOK || !r.opts.RetryFailed) {
			r.res.Skipped++
			r.pb.skip(c)
			continue
		}
		r.evaluate()
		r.grantWaiting()
		cancelled := r.cellsDone
		for r.running >= r.limit() || len(r.waiting) > 0 {
			if err := r.await(ctx, cctx, tick, &cancelled); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			r.res.Interrupted, r.runErr = true, ctx.Err()
			return nil
		}
		if wait := time.Until(lastStart.Add(r.opts.StartGap)); r.opts.StartGap > 0 && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			if ctx.Err() != nil {
				r.res.Interrupted, r.runErr = true, ctx.Err()
				return nil
			}
		}
		lastStart = time.Now()
		if err := os.RemoveAll(cellDir); err != nil {
			return fmt.Errorf("cell %s: clear old files: %w", c.ID, err)
		}
		if err := os.MkdirAll(cellDir, 0o755); err != nil {
			return fmt.Errorf("cell %s: %w", c.ID, err)
		}
		r.start(cctx, c, cellDir)
	}
	return nil
}

// start runs cell c in a goroutine of its own that reports on results.
func (r *campaignRun) start(cctx context.Context, c Cell, dir string) {
	r.pb.start(c)
	r.log.Info("cell start", "cell", c.ID)
	r.running++
	if r.adm != nil {
		r.adm.observe(time.Now(), r.running)
	}
	mark := r.opts.Timing.markHost()
	ctx := cctx
	if r.adm != nil {
		ctx = withRepGate(cctx, r.gateFor())
	}
	go func() {
		start := r.now()
		sum, err := runCellSafely(ctx, r.opts.Runner, c, dir)
		r.results <- cellOutcome{c: c, dir: dir, start: start, end: r.now(), sum: sum, err: err, host: mark}
	}()
}

// record takes a cell that ended: its done marker (unless the run was
// cancelled: then it stays incomplete), the progress bar, the periodic
// aggregates and the timing guard's verdict so far.
func (r *campaignRun) record(ctx, cctx context.Context, o cellOutcome) error {
	r.running--
	if r.adm != nil {
		r.adm.observe(time.Now(), r.running)
	}
	r.opts.Timing.sampleLoad()
	if cctx.Err() != nil {
		// Interrupted, or a fatal error: the cell stays incomplete (no done marker).
		r.log.Info("cell abandoned", "cell", o.c.ID)
		if ctx.Err() != nil {
			r.res.Interrupted, r.runErr = true, ctx.Err()
		}
		return nil
	}
	g := r.opts.Timing
	g.RecordSend(o.sum.SendLate)
	d := Done{Cell: o.c, Status: StatusOK, StartNs: o.start.UnixNano(), EndNs: o.end.UnixNano(),
		Published: o.sum.Published, Delivered: o.sum.Delivered, RepsOK: o.sum.RepsOK,
		Timing: g.cellTiming(o.sum.SendLate, g.hostSince(o.host))}
	if o.err != nil {
		d.Status, d.Error = StatusFailed, o.err.Error()
		r.log.Warn("cell failed", "cell", o.c.ID, "error", o.err)
	} else {
		r.log.Info("cell done", "cell", o.c.ID, "published", o.sum.Published, "delivered", o.sum.Delivered)
	}
	if err := ensureRecordFiles(o.dir); err != nil {
		return err
	}
	if err := writeJSONAtomic(filepath.Join(o.dir, FileDone), d); err != nil {
		return err
	}
	r.res.Ran++
	r.pb.finish(o.c, o.end.Sub(o.start), o.err)
	if r.sinceAgg++; r.sinceAgg >= r.every {
		r.sinceAgg = 0
		if err := Aggregate(r.opts.Dir, r.cf.Cells); err != nil {
			return err
		}
	}
	if g == nil {
		return nil
	}
	// Said once each: the campaign goes on (the admission control lowers
	// the cells at once), the manifest keeps the verdict.
	switch tr := g.Report(r.jobs); {
	case tr.Status == TimingFail && !r.failWarned:
		r.failWarned, r.warned = true, true
		r.log.Error("timing guard: fail so far", "msg", tr.Note)
		r.say("\nwarning: timing guard failing so far: %s\n", tr.Note)
	case tr.Status == TimingWarn && !r.warned:
		r.warned = true
		r.log.Warn("timing guard: warn", "msg", tr.Note)
		r.say("\nwarning: %s\n", tr.Note)
	}
	return nil
}

// end rebuilds the aggregates, writes the final manifest (cell counts,
// end, the timing record combined with a resumed run's) and says what the
// timing guard decided; it returns runErr, or ErrTimingBound when the
// guard failed.
func (r *campaignRun) end() error {
	r.pb.end(r.res.Interrupted)
	if err := Aggregate(r.opts.Dir, r.cf.Cells); err != nil {
		return err
	}
	done, err := completedCells(r.opts.Dir, r.cf.Cells)
	if err != nil {
		return err
	}
	man := &r.man
	man.Cells = CellCounts{Total: len(r.all), InShard: len(r.mine)}
	for _, d := range done {
		if !slices.Contains(r.cf.Mine, d.Cell.ID) {
			continue
		}
		if d.Status == StatusOK {
			man.Cells.OK++
		} else {
			man.Cells.Failed++
			r.res.Failed++
		}
	}
	man.Cells.Pending = len(r.mine) - man.Cells.OK - man.Cells.Failed
	man.End = r.now().UTC()
	man.EndNs = man.End.UnixNano()
	man.RunSpans = append(slices.Clip(man.RunSpans), records.RunSpan{Start: r.runStart, End: man.End})
	man.Host.LoadavgEnd = loadavg()
	man.Interrupted = r.res.Interrupted
	man.Jobs = r.jobs
	var tr TimingReport
	if r.opts.Timing != nil {
		// A resumed campaign's record covers its earlier runs too: their
		// cells are in the results as much as this run's.
		tr = r.opts.Timing.Report(r.jobs)
		man.EmulatorTiming = CombineTiming(r.before, &tr)
	}
	if err := writeJSONAtomic(filepath.Join(r.opts.Dir, FileManifest), *man); err != nil {
		return err
	}
	et := man.EmulatorTiming
	if et == nil || r.opts.Timing == nil {
		return r.runErr
	}
	if tr.JobsRun > 0 && tr.JobsRun < min(r.jobs, r.res.Ran) { // fewer than there was work for
		r.say("timing guard: at most %s ran at once, of the %d asked for (manifest.json emulator_timing.admission says when and why)\n", cellsWord(tr.JobsRun), r.jobs)
	}
	if et.Failed() && r.runErr == nil {
		r.say("TIMING GUARD FAILED: %s. Do not publish them.\n", et.Note)
		return fmt.Errorf("%w: %s; the results in %s are kept, marked status fail in manifest.json: do not publish them as evidence; rerun with fewer --jobs or on an idler host",
			ErrTimingBound, et.Note, r.opts.Dir)
	}
	return r.runErr
}
