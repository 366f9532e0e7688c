package report

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/energy"
)

// Options configures Generate. Zero values mean the defaults given per
// field.
type Options struct {
	// Dir is the results directory to read. Required.
	Dir string
	// Out is the output directory; "" means Dir/report. It is created.
	Out string
	// Seed seeds the bootstrap; 0 means 1.
	Seed uint64
	// Resamples is the number of bootstrap resamples; 0 means 2000.
	Resamples int
	// EnergyParams is an optional JSON file overriding radio models per
	// technology (see energy.LoadModels); "" keeps the manifest's or the
	// built-in parameters.
	EnergyParams string
	// CPUWatts is the processor's active power; 0 means the manifest's
	// energy.cpu_active_mw, else 2 W.
	CPUWatts float64
	// PowerLog is an optional external power meter CSV (timestamp,watts),
	// aligned with each cell's repetitions by time.
	PowerLog string
	// NoFigures skips drawing (tables only).
	NoFigures bool
	// LogCDF draws the delay CDFs on a log axis always (by default only
	// when the delays span more than a factor of 20).
	LogCDF bool
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// Output file names inside Options.Out.
const (
	FileMarkdown = "report.md"
	FileHTML     = "report.html"
	FileTables   = "tables.csv"
	FileSummary  = "summary.json"
	DirFigures   = "figures"
)

// Generate reads opts.Dir, computes the statistics, draws the figures and
// writes the report files into opts.Out. It returns what it computed. A
// directory holding none of the result files returns an error wrapping
// ErrNotResults.
func Generate(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("report: no results directory given")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := opts.Out
	if out == "" {
		out = filepath.Join(opts.Dir, "report")
	}
	seed := opts.Seed
	if seed == 0 {
		seed = 1
	}
	ds, err := load(opts.Dir)
	if err != nil {
		return nil, err
	}
	ec, err := energyModels(ds, opts.EnergyParams, opts.CPUWatts)
	if err != nil {
		return nil, err
	}
	var plog energy.PowerLog
	if opts.PowerLog != "" {
		plog, err = energy.ReadPowerLog(opts.PowerLog)
		if err != nil {
			return nil, err
		}
	} else if p := manifestPowerLog(ds.man); p != "" {
		// the scenario named a power log: read it relative to DIR
		if !filepath.IsAbs(p) {
			p = filepath.Join(opts.Dir, p)
		}
		if plog, err = energy.ReadPowerLog(p); err != nil {
			reason := "unreadable or malformed"
			if errors.Is(err, fs.ErrNotExist) {
				reason = "missing"
			}
			ds.note("the power log %s named in manifest.json is %s: no measured energy", filepath.Base(p), reason)
			plog = nil
		} else {
			opts.PowerLog = p
		}
	}
	if ds.man.Fabric == "local" {
		ds.note("fabric local: every node ran on loopback and no link was emulated; the profiles and loss rates name the cells but were not applied, and the bounds assume links that were not there")
	}
	cells, xi := analyze(ds, seed, opts.Resamples)
	if len(cells) == 0 {
		ds.note("no cells found in any file: the report is empty")
	}
	estimateEnergy(ds, cells, ec, plog)
	var exps []string
	seenExp := map[string]bool{}
	for _, c := range cells {
		if !seenExp[c.Experiment] {
			seenExp[c.Experiment] = true
			exps = append(exps, c.Experiment)
		}
	}
	models, cpu := ec.table(exps)
	if plog != nil {
		aligned := 0
		for _, c := range cells {
			if c.Energy != nil && c.Energy.MeasuredJ == c.Energy.MeasuredJ {
				aligned++
			}
		}
		if aligned == 0 {
			ds.note("the power log does not overlap any cell's time window: no measured energy (check that its timestamps are Unix time of the same host)")
		}
	}
	s := &Summary{
		Source:       filepath.Base(filepath.Clean(opts.Dir)),
		Manifest:     flattenManifest(ds.manifest),
		Files:        ds.present,
		Cells:        cells,
		Xi:           xi,
		EnergyModels: models,
		CPUWatts:     cpu,
		BoardBase:    ec.boardBase(exps),
		Percentiles:  "linear interpolation between closest ranks (Hyndman-Fan type 7)",
		Batch:        batchResults(ds, cells),
		Experiments:  experimentSummaries(cells, xi),
		Bootstrap:    bootstrapMethod(seed, opts.Resamples),
	}
	s.Comparisons = comparisons(cells, xi, s.Batch, seed, opts.Resamples)
	s.Failover = failoverResults(opts.Dir, seed, opts.Resamples)
	s.PathChange = pathChangeResults(opts.Dir, seed, opts.Resamples) // E10: report/e10.go
	s.Comparisons = append(s.Comparisons, pathChangeComparisons(s.PathChange, seed, opts.Resamples)...)
	s.HOL, s.HOLComparisons = holResults(ds, cells, seed, opts.Resamples) // E9: report/e9.go
	s.PerConfiguration = perConfiguration(cells, seed, opts.Resamples)
	if opts.PowerLog != "" {
		s.PowerLog = filepath.Base(opts.PowerLog)
	}
	if err := os.MkdirAll(filepath.Join(out, DirFigures), 0o755); err != nil {
		return nil, fmt.Errorf("report: create output directory: %w", err)
	}
	if !opts.NoFigures {
		figs, err := drawFigures(ctx, s, filepath.Join(out, DirFigures), opts.LogCDF)
		if err != nil {
			return nil, err
		}
		s.Figures = figs
		log.Info("figures drawn", "count", len(figs))
	}
	s.Notes = ds.notes
	if s.Notes == nil {
		s.Notes = []string{}
	}
	for _, w := range []struct {
		name string
		fn   func(*Summary) ([]byte, error)
	}{{FileMarkdown, markdown}, {FileTables, tablesCSV}, {FileSummary, summaryJSON}} {
		b, err := w.fn(s)
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", w.name, err)
		}
		if err := os.WriteFile(filepath.Join(out, w.name), b, 0o644); err != nil {
			return nil, fmt.Errorf("report: write %s: %w", w.name, err)
		}
	}
	html, err := htmlPage(s, filepath.Join(out, DirFigures))
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", FileHTML, err)
	}
	if err := os.WriteFile(filepath.Join(out, FileHTML), html, 0o644); err != nil {
		return nil, fmt.Errorf("report: write %s: %w", FileHTML, err)
	}
	log.Info("report written", "dir", out, "cells", len(cells))
	return s, nil
}

// manifestPowerLog returns the power log a scenario named (energy.power_log
// at the top or in any experiment), or "".
func manifestPowerLog(m records.Manifest) string {
	if m.Energy != nil && m.Energy.PowerLog != "" {
		return m.Energy.PowerLog
	}
	for _, x := range m.Experiments {
		if x.Energy != nil && x.Energy.PowerLog != "" {
			return x.Energy.PowerLog
		}
	}
	return ""
}

// flattenManifest keeps the manifest's scalar fields (nested objects one
// level deep, as a.b) for the report's header, sorted by key.
func flattenManifest(m map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		switch x := v.(type) {
		case map[string]any:
			if depth > 1 {
				return
			}
			for k, vv := range x {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, vv, depth+1)
			}
		case []any:
			if len(x) > 0 && len(x) <= 8 {
				var parts []string
				for _, e := range x {
					switch e.(type) {
					case map[string]any, []any:
						return
					}
					parts = append(parts, fmt.Sprint(e))
				}
				out[prefix] = strings.Join(parts, ", ")
			}
		case nil:
		case float64:
			out[prefix] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			out[prefix] = fmt.Sprint(x)
		}
	}
	walk("", m, 0)
	// paths on the lab's host say nothing to a reader and break determinism
	for k, v := range out {
		if strings.HasPrefix(v, "/") {
			delete(out, k)
		}
	}
	return out
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
