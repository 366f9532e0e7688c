package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/iotq/iotq/report"
)

// reportCommand wires `iotq report` to report.Generate.
func (a *app) reportCommand() *Command {
	c := &Command{
		Name:      "report",
		UsageLine: "iotq report --evidence-index DIR | iotq report DIR [--out DIR2] [--seed N] [--resamples N] [--energy-params FILE] [--cpu-watts W] [--power-log FILE] [--no-figures] [--log-cdf]",
		Short:     "turn a lab results directory into statistics, figures, HTML and Markdown",
		Long: `Report reads the result files of a lab run in DIR (manifest.json, cells.csv,
messages.csv, connections.csv, links.csv, cpu.csv, completions.csv and
cells/CELL/pub.pcap; every file is optional) and writes into DIR2 (default
DIR/report): report.md (Markdown tables), report.html (one self-contained page
with the figures inline), tables.csv (one row per cell), summary.json, and
figures/*.png and figures/*.svg.

Statistics: mean, median, 5th/95th percentiles (linear interpolation, type 7),
RSD, delivery ratio, completion time and xi = T_QUIC/T_TCP with a bootstrap
confidence interval, startup latency, packets per second, bytes per delivered
message, and the publisher's energy estimate (radio power-state model plus
CPU time x active power). The report opens with "Results in plain words": each
headline comparison of TCP and QUIC (delay, RSD and start-up cut %, xi, batch
slow-down) with its 95 % percentile bootstrap interval over the
configurations, "no difference" where the interval holds the null, where QUIC
loses, and small samples flagged.

--out sets the output directory. --seed and --resamples set the bootstrap
(defaults 1 and 2000). --energy-params names a JSON file that overrides radio
model parameters per technology, for example
{"satellite": {"base_w": 25, "idle_w": 12, "source": "terminal data sheet"}}
(fields promotion_w, promotion_s, base_w, up_w_per_mbps, down_w_per_mbps,
tail_w, tail_s, idle_w, source). --cpu-watts sets the processor's active power
(default: the manifest's, else 2 W). --power-log names a CSV of an external
power meter (timestamp,watts; Unix time or RFC 3339) that is integrated over
each cell's repetitions. --no-figures writes the tables only. --log-cdf draws
the delay CDFs (x axis to the largest 99.9th percentile) on a log axis; by
default the axis is logarithmic only when the delays span more than a factor
of 20.

--evidence-index DIR regenerates the section of DIR/README.md between its
BEGIN GENERATED and END GENERATED markers from every campaign folder in DIR
(manifest.json, tables.csv, summary.json): the campaigns' host and timing
guard, and each campaign's headline comparisons with 95 % bootstrap
intervals (seed 1, 2000 resamples). The prose around the markers is left as
it is.`,
		Flags: newFlagSet("report"),
	}
	fs := c.Flags
	out := fs.String("out", "", "output directory (default DIR/report)")
	seed := fs.Uint64("seed", 1, "bootstrap seed")
	resamples := fs.Int("resamples", 2000, "bootstrap resamples")
	params := fs.String("energy-params", "", "JSON file overriding radio energy model parameters")
	cpuW := fs.Float64("cpu-watts", 0, "processor active power in W (0: manifest's, else 2)")
	plog := fs.String("power-log", "", "external power log CSV (timestamp,watts)")
	noFig := fs.Bool("no-figures", false, "write tables only, no figures")
	logCDF := fs.Bool("log-cdf", false, "draw the delay CDFs on a log axis (default: only when delays span more than a factor of 20)")
	verbose := fs.Bool("v", false, "log progress to stderr")
	index := fs.String("evidence-index", "", "regenerate the generated section of `DIR`/README.md from its campaign folders")
	c.Run = runE(func(ctx context.Context, args []string) error {
		if *index != "" {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q: --evidence-index takes only its directory", args[0])
			}
			changed, err := report.UpdateEvidenceIndex(*index)
			if err != nil {
				return err
			}
			state := "unchanged"
			if changed {
				state = "updated"
			}
			fmt.Fprintf(a.stdout, "%s: %s\n", filepath.Join(*index, report.FileEvidenceIndex), state)
			return nil
		}
		if len(args) == 0 {
			return usageErrorf("missing results directory: iotq report DIR")
		}
		dir := args[0]
		// flags may follow the directory
		if err := fs.Parse(args[1:]); err != nil {
			return usageErrorf("%v", err)
		}
		if fs.NArg() > 0 {
			return usageErrorf("unexpected argument %q: give one results directory", fs.Arg(0))
		}
		if *resamples < 1 {
			return usageErrorf("--resamples %d: want at least 1", *resamples)
		}
		if *cpuW < 0 {
			return usageErrorf("--cpu-watts %v: must not be negative", *cpuW)
		}
		opts := report.Options{Dir: dir, Out: *out, Seed: *seed, Resamples: *resamples,
			EnergyParams: *params, CPUWatts: *cpuW, PowerLog: *plog, NoFigures: *noFig, LogCDF: *logCDF}
		if *verbose {
			opts.Logger = levelLogger(a.stderr, slog.LevelInfo)
		}
		s, err := report.Generate(ctx, opts)
		if err != nil {
			if errors.Is(err, report.ErrNotResults) {
				return &exitError{code: exitFailure, msg: err.Error()}
			}
			return err
		}
		outDir := opts.Out
		if outDir == "" {
			outDir = filepath.Join(dir, "report")
		}
		if len(s.Cells) == 0 {
			// An empty report is not a result: a script must not take it
			// for one (the written report still lists what was missing).
			read := "none"
			if len(s.Files) > 0 {
				read = strings.Join(s.Files, ", ")
			}
			return &exitError{code: exitFailure, msg: fmt.Sprintf("%s: no readable cells (files read: %s). Expected the results directory of `iotq lab run --out DIR` with at least one cell: rows in cells.csv or messages.csv, or cells/CELL/done.json (the notes in %s say what was missing)",
				dir, read, filepath.Join(outDir, report.FileMarkdown))}
		}
		fmt.Fprintf(a.stdout, "report: %d cells, %d figures, %d notes\n%s\n%s\n",
			len(s.Cells), len(s.Figures), len(s.Notes),
			filepath.Join(outDir, report.FileHTML), filepath.Join(outDir, report.FileMarkdown))
		return nil
	})
	return c
}
