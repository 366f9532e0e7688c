package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/lab"
	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
)

// labCommand wires `iotq lab run|list|show|merge` to package lab.
func (a *app) labCommand() *Command {
	c := &Command{
		Name:      "lab",
		UsageLine: "iotq lab run SCENARIO|FILE [flags] | list | show SCENARIO|FILE [--scale S] | merge OUT DIR... | probe",
		Short:     "run experiment campaigns end to end (scenarios, cells, results directory)",
		Long: `Lab runs the experiments of docs/experiments.md end to end: for each cell it builds the
topology with the link emulator (one network namespace per node), starts "iotq broker",
"iotq sub" and "iotq pub" as separate processes in their namespaces, drives the traffic
pattern, and collects the records into a results directory (docs/records.md, docs/lab.md).

  iotq lab list [--scale S] [--jobs N]
                                     built-in scenarios, their cell counts and estimated
                                     wall time at scale S with N cells at once
  iotq lab show SCENARIO [--scale S] [--jobs N]
                                     the resolved scenario (YAML), every cell, the estimate
  iotq lab run SCENARIO [flags]      run a campaign
  iotq lab merge OUT DIR...          join shard directories into OUT
  iotq lab pool OUT DIR...           join campaigns of the same cells run with different
                                     seeds (--seed) into OUT, as more repetitions of each
                                     cell (numbered one after the other, in DIR order)
  iotq lab probe [--every D]         the timing guard's host probe: print how late an
                                     ordinary timer wakes (ns per line) until stopped;
                                     "lab run" starts it as a process of its own

SCENARIO is a built-in name ("iotq lab list" lists every one with what it compares; the
-both variants impair both directions of the publisher's link instead of its egress only) or
a YAML file. The transports are broker URL schemes and name the protocol too: mqtts and quic run iotq
broker; coap and coap+quic iotq broker with an extra MQTT listener for the subscriber; amqps
runs ActiveMQ Artemis, amqp+quic Artemis behind iotq gateway (scripts/setup.sh installs
Artemis).

Flags of "lab run" (also "lab show" takes --scale and the overrides):
  --out DIR          results directory (default results/SCENARIO-SCALE); must be new or, with
                     --resume, hold the same campaign
  --scale S          smoke, reduced or full (default full): cuts message counts and repetitions
                     only, never intervals, payloads, losses or link parameters
  --resume           complete the campaign in --out; finished cells are not run again
  --retry-failed     with --resume, run failed cells again
  --jobs N           let up to N independent cells run at once (default 1; at most 64). Each
                     cell has its own namespaces; slow periodic cells are mostly idle. The
                     timing guard decides how many run: a 2 s calibration first (p99 wake-up
                     lateness above 10 ms: no start; above 1 ms: one cell at a time), then one
                     cell to measure the lateness a cell meets alone, then more cells while
                     they add little to it (docs/lab.md, "Admission control"); a campaign
                     above 10 ms is marked fail in manifest.json (not evidence) and exits 1
  --start-gap D      least time between two cell starts (default 250ms): a cell's set-up is
                     its busiest moment, and many cells setting up at once starve the
                     running ones (0: no gap)
  --shard i/n        run every n-th cell starting with the i-th (1 <= i <= n); join with merge
  --iotq PATH        the iotq binary to run as broker, pub and sub (default: this binary)
  --fabric F         link (namespaces and emulated links; root) or local (loopback, no
                     emulation, no root; for trying things out) (default link)
  --no-pcap          do not capture the publisher's link end (DIR/cells/CELL/pub.pcap)
  --profiles LIST, --losses LIST, --transports LIST, --qos LIST, --directions LIST
                     replace the scenario's lists (comma separated, e.g. --losses 0,2,5;
                     --directions egress,both runs E1-E3's reference, the publisher's egress
                     only, and the symmetric variant side by side in one campaign)
  --quic-0rtt LIST   replace the broker's QUIC 0-RTT policies swept over the MQTT over QUIC
                     cells: accept, hold, refuse (docs/0rtt.md; e5 runs hold and accept)
  --repetitions N    repetitions per cell, replacing the scale's (message counts, intervals
                     and links stay the scale's; the manifest records the number)
  --seed N           the seed of the emulator's random loss, replacing the scenario's (each
                     cell derives its own from it); a second campaign of the same cells run
                     with another seed adds independent repetitions: join them with pool
  --check            validate the scenario, print the number of cells and exit
  --log-level L      debug, info, warn or error for the log on stderr (default error; the
                     progress lines already name failed cells)

Ctrl-C stops after abandoning the running cell; the directory stays consistent and
"--resume" completes it. Exit status 1 if a cell failed.`,
		Flags: newFlagSet("lab"),
	}
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return usageErrorf("missing subcommand: run, list, show, merge, pool or probe")
		}
		switch args[0] {
		case "run":
			return a.labRun(ctx, args[1:])
		case "list":
			return a.labList(args[1:])
		case "show":
			return a.labShow(args[1:])
		case "probe":
			return a.labProbe(ctx, args[1:])
		case "pool":
			if len(args) < 4 {
				return usageErrorf("pool needs OUT and at least two results DIRs")
			}
			if err := lab.Pool(args[1], args[2:]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "pooled %d campaigns into %s\n", len(args)-2, args[1])
			return nil
		case "merge":
			if len(args) < 3 {
				return usageErrorf("merge needs OUT and at least one shard DIR")
			}
			if err := lab.Merge(args[1], args[2:]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "merged %d directories into %s\n", len(args)-2, args[1])
			return nil
		default:
			return usageErrorf("unknown subcommand %q: want run, list, show, merge, pool or probe", args[0])
		}
	})
	return c
}

// labSelect holds the flags that choose and reshape a scenario.
type labSelect struct {
	scale                                          string
	profiles, losses, transports, qoss, directions string
	quic0rtt                                       string
	repetitions                                    int
	seed                                           int64
}

func (s *labSelect) register(fs *flag.FlagSet) {
	fs.StringVar(&s.scale, "scale", "full", "smoke, reduced or full")
	fs.StringVar(&s.profiles, "profiles", "", "replace the profiles (comma separated)")
	fs.StringVar(&s.losses, "losses", "", "replace the losses in percent (comma separated)")
	fs.StringVar(&s.transports, "transports", "", "replace the transports: mqtts, quic, amqps, amqp+quic, ...")
	fs.StringVar(&s.qoss, "qos", "", "replace the QoS levels (comma separated)")
	fs.StringVar(&s.directions, "directions", "", "replace the impairment directions: egress, ingress, both")
	fs.IntVar(&s.repetitions, "repetitions", 0, "replace the scale's repetitions per cell")
	fs.Int64Var(&s.seed, "seed", 0, "replace the scenario's seed of the emulator's random loss (0: the scenario's)")
	fs.StringVar(&s.quic0rtt, "quic-0rtt", "", "replace the broker's QUIC 0-RTT policies of MQTT over QUIC cells: accept, hold, refuse")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// resolve loads the scenario, applies overrides and the scale.
func (s *labSelect) resolve(name string) ([]lab.Spec, error) {
	specs, err := lab.Resolve(name)
	if errors.Is(err, lab.ErrUnknownScenario) {
		return nil, usageErrorf("%v", err)
	}
	if err != nil {
		return nil, err
	}
	var out []lab.Spec
	for _, sp := range specs {
		// A scenario that is valid as written but not with the flags'
		// replacements (--transports mqtts,http, --qos 2 with amqps) is a
		// usage error (exit 2); a scenario file invalid by itself is not.
		fileErr := error(nil)
		if base, err := sp.Scaled(s.scale); err == nil {
			fileErr = base.Validate()
		}
		if s.profiles != "" {
			sp.Profiles = splitList(s.profiles)
		}
		if s.transports != "" {
			sp.Transports = splitList(s.transports)
		}
		if s.seed != 0 {
			sp.Seed = s.seed
		}
		if s.directions != "" {
			sp.Topology.Directions = splitList(s.directions)
		}
		if s.quic0rtt != "" {
			sp.QUIC0RTT = nil
			for _, p := range splitList(s.quic0rtt) {
				sp.QUIC0RTT = append(sp.QUIC0RTT, records.EarlyPolicy(p))
			}
		}
		if s.losses != "" {
			sp.Losses = nil
			for _, f := range splitList(s.losses) {
				p, err := lab.ParsePercent(f)
				if err != nil {
					return nil, usageErrorf("--losses: %v", err)
				}
				sp.Losses = append(sp.Losses, p)
			}
		}
		if s.qoss != "" {
			sp.QoS = nil
			for _, f := range splitList(s.qoss) {
				q, err := strconv.Atoi(f)
				if err != nil {
					return nil, usageErrorf("--qos %q: want numbers 0, 1 or 2", f)
				}
				sp.QoS = append(sp.QoS, q)
			}
		}
		sc, err := sp.Scaled(s.scale)
		if err != nil {
			return nil, usageErrorf("--scale: %v", err)
		}
		if s.repetitions != 0 {
			// After scaling: the flag states the repetitions outright,
			// whatever the scale would have chosen.
			if s.repetitions < 1 {
				return nil, usageErrorf("--repetitions %d: want at least 1", s.repetitions)
			}
			sc.Repetitions = s.repetitions
		}
		if err := sc.Validate(); err != nil {
			if fileErr == nil {
				return nil, usageErrorf("scenario %s with these flags: %s", name, strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			return nil, fmt.Errorf("scenario %s: %w", name, err)
		}
		out = append(out, sc)
	}
	return out, nil
}

func (a *app) labList(args []string) error {
	fs := flag.NewFlagSet("lab list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	scale := fs.String("scale", "full", "smoke, reduced or full")
	jobs := fs.Int("jobs", 1, "cells at once")
	if err := parseSub(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("list takes no scenario (got %q); for one scenario's cells: iotq lab show %s", fs.Arg(0), fs.Arg(0))
	}
	if err := checkJobs(*jobs); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%-8s %5s  %-9s  %s\n", "name", "cells", "wall", fmt.Sprintf("description (wall: estimate at scale %s, --jobs %d)", *scale, *jobs))
	for _, n := range lab.BuiltinNames() {
		sel := labSelect{scale: *scale}
		specs, err := sel.resolve(n)
		if err != nil {
			return err
		}
		cells, err := lab.Cells(specs)
		if err != nil {
			return err
		}
		var desc []string
		for _, s := range specs {
			desc = append(desc, s.Experiment+": "+s.Description)
		}
		fmt.Fprintf(a.stdout, "%-8s %5d  %-9s  %s\n", n, len(cells), lab.FormatWall(lab.EstimateWall(cells, *jobs)), strings.Join(desc, "; "))
	}
	return nil
}

// resumeCommand is the command line that completes an interrupted run:
// the same arguments (a campaign's cells depend on all of them), its
// results directory and --resume.
func resumeCommand(args []string, dir string) string {
	out := []string{"iotq", "lab", "run"}
	hasOut, hasResume := false, false
	for _, a := range args {
		switch {
		case a == "--out" || a == "-out" || strings.HasPrefix(a, "--out=") || strings.HasPrefix(a, "-out="):
			hasOut = true
		case a == "--resume" || a == "-resume" || a == "--resume=true" || a == "-resume=true":
			hasResume = true
		}
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	if !hasOut {
		out = append(out, "--out", dir)
	}
	if !hasResume {
		out = append(out, "--resume")
	}
	return strings.Join(out, " ")
}

func checkJobs(n int) error {
	if n < 1 || n > lab.MaxJobs {
		return usageErrorf("--jobs %d: want 1 to %d cells at once", n, lab.MaxJobs)
	}
	return nil
}

// labProbe runs the timing guard's host probe until ctx ends (SIGTERM or
// Ctrl-C) or stdout closes.
func (a *app) labProbe(ctx context.Context, args []string) error {
	fs, every := newLabProbeFlags()
	if err := parseSub(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("lab probe takes no arguments, got %q", fs.Args())
	}
	if *every <= 0 {
		return usageErrorf("--every %s: want a positive duration such as 10ms", *every)
	}
	return lab.ProbeLoop(ctx, *every, a.stdout)
}

// newLabProbeFlags returns lab probe's flag set, apart so a test parses
// the lab's lab.ProbeArgs with it.
func newLabProbeFlags() (*flag.FlagSet, *time.Duration) {
	fs := flag.NewFlagSet("lab probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, fs.Duration("every", 10*time.Millisecond, "the probe timer's period")
}

func (a *app) labShow(args []string) error {
	fs := flag.NewFlagSet("lab show", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var sel labSelect
	sel.register(fs)
	jobs := fs.Int("jobs", 1, "cells at once (for the estimate)")
	name, rest := splitScenarioArg(args)
	if err := parseSub(fs, rest); err != nil {
		return err
	}
	if err := checkJobs(*jobs); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		return usageErrorf("lab show needs a scenario: a built-in name or a YAML file")
	}
	specs, err := sel.resolve(name)
	if err != nil {
		return err
	}
	// the values a run will use: defaults filled in (seed, congestion
	// control, grace, topology), not the zero values of the file
	resolved := make([]lab.Spec, len(specs))
	for i, s := range specs {
		resolved[i] = s.Resolved()
	}
	y, err := lab.MarshalSpecs(resolved)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "# scenario %s at scale %s, with the defaults a run fills in\n%s", name, sel.scale, y)
	cells, err := lab.Cells(specs)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "# %d cells; estimated wall time %s with --jobs %d (%s one at a time)\n", len(cells),
		lab.FormatWall(lab.EstimateWall(cells, *jobs)), *jobs, lab.FormatWall(lab.EstimateWall(cells, 1)))
	fmt.Fprintf(a.stdout, "# %-60s %-9s %-7s %-7s %-10s %-10s %-8s %-4s %5s %8s %5s  %-11s  %s\n", "cell", "profile", "loss%", "impair", "pub_delay", "sub_delay", "rate", "qos", "msgs", "interval", "reps", "broker_0rtt", "quic_streams")
	for _, c := range cells {
		dir := c.PubLink.Direction
		if dir == "" {
			dir = lab.DirectionBoth
		}
		policy := c.QUIC0RTT // the broker's QUIC 0-RTT policy (MQTT over QUIC cells)
		if policy == "" {
			policy = "-"
		}
		streams := c.QUICStreams // the clients' QUIC stream strategy (MQTT over QUIC cells)
		if streams == "" {
			streams = "-"
		}
		fmt.Fprintf(a.stdout, "  %-60s %-9s %-7s %-7s %-10s %-10s %-8s %-4d %5d %8s %5d  %-11s  %s\n", c.ID, c.Profile, strconv.FormatFloat(c.LossPct, 'f', -1, 64), dir,
			c.PubLink.Delay(), c.SubLink.Delay(), lab.Rate(c.PubLink.RateBps), c.QoS, c.Messages, c.Interval(), c.Repetitions, policy, streams)
	}
	return nil
}

// splitScenarioArg lets the scenario come before the flags
// ("lab run smoke --scale smoke").
func splitScenarioArg(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

func (a *app) labRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lab run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var sel labSelect
	sel.register(fs)
	out := fs.String("out", "", "results directory")
	resume := fs.Bool("resume", false, "complete the campaign in --out")
	retry := fs.Bool("retry-failed", false, "with --resume, rerun failed cells")
	shard := fs.String("shard", "", "i/n")
	iotq := fs.String("iotq", "", "iotq binary for the nodes")
	fabric := fs.String("fabric", "link", "link or local")
	noPcap := fs.Bool("no-pcap", false, "no capture")
	check := fs.Bool("check", false, "validate and exit")
	jobs := fs.Int("jobs", 1, "cells at once")
	startGap := fs.Duration("start-gap", 250*time.Millisecond, "least time between two cell starts (set-up storms of many jobs)")
	logLevel := fs.String("log-level", "error", "debug, info, warn, error")
	name, rest := splitScenarioArg(args)
	if err := parseSub(fs, rest); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usageErrorf("lab run: unexpected arguments %v (flags go after the scenario)", fs.Args())
	}
	if name == "" {
		return usageErrorf("lab run needs a scenario: a built-in name (iotq lab list) or a YAML file")
	}
	specs, err := sel.resolve(name)
	if err != nil {
		return err
	}
	cells, err := lab.Cells(specs)
	if err != nil {
		return err
	}
	si, sn := 0, 1
	if *shard != "" {
		if si, sn, err = lab.ParseShard(*shard); err != nil {
			return usageErrorf("--shard: %v", err)
		}
	}
	if err := checkJobs(*jobs); err != nil {
		return err
	}
	logger, _, err := newLogger(a.stderr, serve.LogOptions{Level: *logLevel})
	if err != nil {
		return usageErrorf("%v", err)
	}
	if *check {
		mine := lab.Shard(cells, si, sn)
		fmt.Fprintf(a.stdout, "scenario %s at scale %s: %d cells, %d in shard %d/%d; estimated wall time %s with --jobs %d\n", name, sel.scale, len(cells), len(mine), si+1, sn,
			lab.FormatWall(lab.EstimateWall(mine, *jobs)), *jobs)
		return nil
	}
	var fab lab.Fabric
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab: finding this program to run the timing guard's probe: %w", err)
	}
	timing := &lab.TimingGuard{ProbeEvery: 10 * time.Millisecond,
		ProbeCommand: append([]string{self}, lab.ProbeArgs{Every: 10 * time.Millisecond}.Argv()...)}
	switch *fabric {
	case "link":
		lf := lab.LinkFabric{Logger: logger, Timing: timing}
		if err := lf.Preflight(); err != nil {
			return fmt.Errorf("the link fabric cannot run here: %w (or try --fabric local: loopback, no emulation)", err)
		}
		fab = lf
		// This process hosts the emulators of every running cell: all
		// its threads run real-time (the node processes it starts do not,
		// nor the probe process that stands for them).
		// Each cell's forwarding thread needs one of the runtime's Ps
		// for a moment after every timer wake-up; with the default (one
		// per CPU) 50 cells wait for 2 Ps, and the emulator ran 5-16 ms
		// late at the 99th percentile in a smoke run with 8 cells on a
		// loaded 2-CPU host (0.3-0.4 ms with 16 Ps). GOMAXPROCS in the
		// environment wins.
		if os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(min(max(runtime.NumCPU()+*jobs, runtime.NumCPU()), 64))
		}
		rt, err := link.RaiseProcess()
		if err != nil {
			logger.Warn("the lab process runs without real-time priority; the emulator's timing error grows with load", "error", err)
		} else {
			defer rt.Stop()
			// An interrupted campaign only tears down: its threads go back
			// to normal at once, so that however long the teardown takes
			// it cannot keep the host's ordinary processes off the CPUs.
			defer context.AfterFunc(ctx, rt.Stop)()
		}
	case "local":
		fab = lab.LocalFabric{}
		timing = nil // no emulator, nothing to time
	default:
		return usageErrorf("--fabric %q: want link or local", *fabric)
	}
	dir := *out
	if dir == "" {
		base := strings.TrimSuffix(name, ".yaml")
		base = strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == ' ' {
				return '_'
			}
			return r
		}, base)
		dir = "results/" + base + "-" + sel.scale
		if sn > 1 {
			dir += fmt.Sprintf("-shard%dof%d", si+1, sn)
		}
	}
	runner, err := lab.NewProcRunner(lab.ProcOptions{IOTQ: *iotq, Fabric: fab, NoPcap: *noPcap, Logger: logger})
	if err != nil {
		return err
	}
	mine := lab.Shard(cells, si, sn)
	todo, what := mine, ""
	if *resume {
		// The estimate covers what this run has left to do.
		if todo, err = lab.Pending(dir, mine, *retry); err != nil {
			return err
		}
		what = fmt.Sprintf(", %d to run", len(todo))
	}
	fmt.Fprintf(a.stderr, "lab: %s at scale %s: %d cells (shard %d/%d)%s, up to %d at once, into %s; %s\n", name, sel.scale, len(mine), si+1, sn, what, *jobs, dir,
		estimateRange(todo, *jobs, timing != nil))
	res, err := lab.Run(ctx, specs, lab.Options{Dir: dir, Resume: *resume, RetryFailed: *retry, Shard: si, Shards: sn,
		Scenario: name, Scale: sel.scale, Runner: runner, Fabric: fab.Name(), Progress: a.stderr, Logger: logger,
		Jobs: *jobs, Timing: timing, StartGap: *startGap})
	if err != nil {
		if res.Interrupted || errors.Is(err, context.Canceled) {
			return &exitError{code: 130, msg: fmt.Sprintf("interrupted: %d cells done this run; complete it with: %s", res.Ran, resumeCommand(args, dir))}
		}
		return err
	}
	fmt.Fprintf(a.stdout, "%s\n", dir)
	if res.Failed > 0 {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("%d of %d cells failed (see %s/cells.csv); rerun them with --resume --retry-failed", res.Failed, res.InShard, dir)}
	}
	return nil
}

// estimateRange words a campaign's wall-time estimate. Under the timing
// guard the number of cells at once is decided while the campaign runs
// (heavy cells may run one at a time), so a single figure at the requested
// --jobs would promise too much: it gives the span from all at once to one
// at a time.
func estimateRange(cells []lab.Cell, jobs int, guarded bool) string {
	all := lab.FormatWall(lab.EstimateWall(cells, jobs))
	if !guarded || jobs <= 1 {
		return "estimated " + all
	}
	return fmt.Sprintf("estimated %s if up to %d run at once, %s one at a time (the timing guard decides how many run; docs/lab.md)",
		all, min(jobs, len(cells)), lab.FormatWall(lab.EstimateWall(cells, 1)))
}
