package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/iotq/iotq/records"
)

// CellRunner runs one cell. It writes the cell's record files (see
// recordFiles; each with its header) and any raw files into dir, which
// exists and is empty. It returns an error when the cell failed; when ctx
// is cancelled it returns promptly and the cell stays incomplete.
type CellRunner interface {
	RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error)
}

// Options configure a campaign. Zero values are defaults.
type Options struct {
	// Dir is the results directory. Required.
	Dir string
	// Resume completes a campaign in Dir: cells with a done marker are not
	// run again. Without it, a Dir that already holds a campaign is an error.
	Resume bool
	// RetryFailed, with Resume, runs failed cells again.
	RetryFailed bool
	// Shard (0-based) and Shards pick every Shards-th cell starting at
	// Shard. Shards 0 or 1 runs all.
	Shard, Shards int
	// Scenario and Scale are recorded in the manifest.
	Scenario, Scale string
	// Runner runs the cells. Required.
	Runner CellRunner
	// Fabric names the network fabric for the manifest.
	Fabric string
	// Progress receives the progress bar; nil shows none.
	Progress io.Writer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AggregateEvery rebuilds the aggregate files after this many finished
	// cells (besides at the end). 0 means 10.
	AggregateEvery int
	// Jobs is how many cells may run at once (each in its own
	// namespaces); 0 or 1 runs them one after another. The Timing guard
	// may allow fewer. The Runner must be safe for concurrent use when
	// Jobs > 1.
	Jobs int
	// Timing, when set, measures the cells' timing error: the link
	// emulator's (LinkFabric.Timing points to the same guard), the
	// publishers' send lateness (CellSummary.SendLate) and, with a probe,
	// the host's. With a probe it calibrates on the idle host first
	// (refusing to start with ErrTimingBound when that is already above
	// the fail bound) and its admission control decides how many of the
	// Jobs cells run at once; without one every reduction comes from the
	// cells' reports. Above TimingWarnP99 the campaign warns; a campaign
	// whose figures end above TimingRefuseP99 is marked fail in the
	// manifest and Run returns ErrTimingBound. Its report goes into the
	// manifest.
	Timing *TimingGuard
	// StartGap is the least time between two cell starts. A cell's set-up
	// (namespaces, certificates, a broker and clients starting) is its
	// busiest moment; with many jobs all of them starting at once
	// saturated a 2-core host for minutes and delayed the cells already
	// running. 0 starts cells as soon as a slot is free.
	StartGap time.Duration
}

// MaxJobs bounds Options.Jobs: beyond it the forwarding threads and node
// processes of the cells compete for far more than any host has.
const MaxJobs = 64

// Result summarises a campaign run.
type Result struct {
	Total       int // cells in the campaign
	InShard     int // cells of this shard
	Skipped     int // already complete before this run
	Ran         int // run now (ok or failed)
	Failed      int // failed among all complete cells of the shard
	Interrupted bool
}

// campaignFile is DIR/campaign.json: the identity of a campaign, checked
// on resume.
type campaignFile struct {
	Scenario string   `json:"scenario"`
	Scale    string   `json:"scale"`
	Shard    string   `json:"shard"`
	Cells    []string `json:"cells"`       // every cell of the campaign, in order
	Mine     []string `json:"shard_cells"` // the cells of this shard
}

func shardString(i, n int) string {
	if n <= 1 {
		return "1/1"
	}
	return fmt.Sprintf("%d/%d", i+1, n)
}

// runCellSafely turns a runner panic into a failed cell, so one bad cell
// cannot end the campaign.
func runCellSafely(ctx context.Context, r CellRunner, c Cell, dir string) (sum CellSummary, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cell runner panicked: %v", p)
		}
	}()
	return r.RunCell(ctx, c, dir)
}

// ensureRecordFiles creates any record file the runner did not write, with
// its header only, so every complete cell has the same files.
func ensureRecordFiles(dir string) error {
	for _, rf := range recordFiles() {
		p := filepath.Join(dir, rf.name)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := rf.create(p); err != nil {
			return err
		}
	}
	return nil
}

// prepareDir creates Dir, or checks that it holds the same campaign when
// resuming.
func prepareDir(opts Options, cf campaignFile) error {
	b, err := os.ReadFile(filepath.Join(opts.Dir, FileCampaign))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !opts.Resume {
			if entries, err := os.ReadDir(opts.Dir); err == nil && len(entries) > 0 {
				return fmt.Errorf("results directory %s is not empty: choose another --out, or empty it", opts.Dir)
			}
		}
		if err := os.MkdirAll(filepath.Join(opts.Dir, DirCells), 0o755); err != nil {
			return fmt.Errorf("results directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("results directory: %w", err)
	}
	if !opts.Resume {
		return fmt.Errorf("results directory %s already holds a campaign: add --resume to complete it, or choose another --out", opts.Dir)
	}
	var old campaignFile
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("%s: corrupt campaign file: %w", filepath.Join(opts.Dir, FileCampaign), err)
	}
	if !slices.Equal(old.Cells, cf.Cells) || old.Shard != cf.Shard {
		return fmt.Errorf("results directory %s holds a different campaign (scenario %q, scale %q, shard %s, %d cells; now scenario %q, scale %q, shard %s, %d cells): resume with the same scenario, --scale and --shard, or choose another --out",
			opts.Dir, old.Scenario, old.Scale, old.Shard, len(old.Cells), cf.Scenario, cf.Scale, cf.Shard, len(cf.Cells))
	}
	return os.MkdirAll(filepath.Join(opts.Dir, DirCells), 0o755)
}

func readManifest(dir string) (Manifest, bool) {
	b, err := os.ReadFile(filepath.Join(dir, FileManifest))
	if err != nil {
		return Manifest{}, false
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil {
		return Manifest{}, false
	}
	return m, true
}

// Merge joins shard directories into out: every completed cell is copied
// (a cell complete in two shards is taken from the first that holds it),
// the aggregate files are rebuilt and the manifest lists every shard's
// manifest; its emulator timing combines every shard's (CombineTiming).
// The shards must come from the same campaign.
func Merge(out string, dirs []string) error {
	if len(dirs) == 0 {
		return errors.New("merge: no shard directories given")
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("merge: %s is not empty: choose a new output directory", out)
	}
	var first campaignFile
	var man Manifest
	var order []string
	seen := map[string]string{}
	if err := os.MkdirAll(filepath.Join(out, DirCells), 0o755); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for i, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, FileCampaign))
		if err != nil {
			return fmt.Errorf("merge: %s is not a results directory (no %s): %w", dir, FileCampaign, err)
		}
		var cf campaignFile
		if err := json.Unmarshal(b, &cf); err != nil {
			return fmt.Errorf("merge: %s: corrupt %s: %w", dir, FileCampaign, err)
		}
		m, _ := readManifest(dir)
		if i == 0 {
			first, order = cf, cf.Cells
			man = m
			man.Shards = nil
			man.RunSpans = nil // each shard's are in its manifest under shards
			yml, err := os.ReadFile(filepath.Join(dir, FileScenario))
			if err != nil {
				return fmt.Errorf("merge: %s: %w", dir, err)
			}
			if err := writeFileAtomic(filepath.Join(out, FileScenario), yml); err != nil {
				return err
			}
		} else if !slices.Equal(cf.Cells, first.Cells) {
			return fmt.Errorf("merge: %s belongs to another campaign than %s (different cell lists: scenario %q scale %q vs %q %q)", dir, dirs[0], cf.Scenario, cf.Scale, first.Scenario, first.Scale)
		}
		man.Shards = append(man.Shards, m)
		done, err := completedCells(dir, order)
		if err != nil {
			return err
		}
		for _, d := range done {
			if prev, ok := seen[d.Cell.ID]; ok {
				_ = prev
				continue
			}
			seen[d.Cell.ID] = dir
			if err := os.CopyFS(filepath.Join(out, DirCells, d.Cell.ID), os.DirFS(filepath.Join(dir, DirCells, d.Cell.ID))); err != nil {
				return fmt.Errorf("merge: copy cell %s from %s: %w", d.Cell.ID, dir, err)
			}
		}
	}
	cf := campaignFile{Scenario: first.Scenario, Scale: first.Scale, Shard: "1/1", Cells: first.Cells, Mine: first.Cells}
	if err := writeJSONAtomic(filepath.Join(out, FileCampaign), cf); err != nil {
		return err
	}
	if err := Aggregate(out, order); err != nil {
		return err
	}
	done, err := completedCells(out, order)
	if err != nil {
		return err
	}
	return writeCombinedManifest(out, man, records.ShardMerged, order, done)
}

// writeCombinedManifest writes out's manifest for a directory built from
// the campaigns in man.Shards (merged shards or pooled repetitions): its
// cell counts from done, its timing, jobs, start and end from the sources.
func writeCombinedManifest(out string, man Manifest, kind string, order []string, done []Done) error {
	man.Shard = kind
	man.Cells = CellCounts{Total: len(order), InShard: len(order)}
	for _, d := range done {
		if d.Status == StatusOK {
			man.Cells.OK++
		} else {
			man.Cells.Failed++
		}
	}
	man.Cells.Pending = len(order) - man.Cells.OK - man.Cells.Failed
	man.EmulatorTiming = nil
	man.Start, man.StartNs, man.End, man.EndNs = time.Time{}, 0, time.Time{}, 0
	for _, s := range man.Shards {
		man.EmulatorTiming = CombineTiming(man.EmulatorTiming, s.EmulatorTiming)
		man.Jobs = max(man.Jobs, s.Jobs)
		if s.StartNs != 0 && (man.StartNs == 0 || s.StartNs < man.StartNs) {
			man.Start, man.StartNs = s.Start, s.StartNs
		}
		if s.EndNs > man.EndNs {
			man.End, man.EndNs = s.End, s.EndNs
		}
		man.Interrupted = man.Interrupted || s.Interrupted
	}
	return writeJSONAtomic(filepath.Join(out, FileManifest), man)
}

// Pending returns the cells of a campaign in dir that a resumed run would
// run: those without a done marker, and failed ones when retryFailed.
// A directory that does not exist yet has every cell pending.
func Pending(dir string, cells []Cell, retryFailed bool) ([]Cell, error) {
	var out []Cell
	for _, c := range cells {
		d, ok, err := readDone(filepath.Join(dir, DirCells, c.ID))
		if err != nil {
			return nil, err
		}
		if ok && (d.Status == StatusOK || !retryFailed) {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// cellsWord is "one cell" or "N cells".
func cellsWord(n int) string {
	if n == 1 {
		return "one cell"
	}
	return fmt.Sprintf("%d cells", n)
}
