package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/iotq/iotq/link"
)

// linkCommand wires "iotq link shell|up|down|stats" to package link.
func (a *app) linkCommand() *Command {
	c := &Command{
		Name:      "link",
		UsageLine: "iotq link shell|up|down|stats [flags] [-- CMD ARGS...]",
		Short:     "emulate wifi, cellular and satellite links between network namespaces",
		Long: `
Link puts real TCP and QUIC behind emulated links (delay, jitter, loss, rate,
queue) in user space: one TUN device per link end, network namespaces, no netem.
It needs root (CAP_NET_ADMIN) and /dev/net/tun.

  iotq link shell [flags] -- CMD ARGS...
	Runs CMD in a fresh namespace whose only route goes through an emulated
	link to the host namespace. Inside, IOTQ_HOST_ADDR holds the host's
	address on the link (reach services on the host through it). Prints the
	counters at exit and returns CMD's exit code (as a shell: 127 when CMD
	is not found, 126 when it cannot be executed). Flags:
	  --profile NAME  wifi, cellular, satellite or ethernet: the rate and the
	                  table's delay figure, used as one-way delay
	  --delay D       one-way delay of each direction (25ms, 1.5s)
	  --rtt D         round-trip time (each direction gets half)
	  --jitter J      jitter, --jitter-dist normal|uniform|pareto|paretonormal
	  --loss P        random loss per packet and direction (5%)
	  --ge P,R[,1-H[,1-K]]  Gilbert-Elliott loss instead (netem's gemodel
	                  order, percentages: --ge 1%,25% gives bursts of 4)
	  --rate R        rate of each direction as tc writes it (20mbit, 512kbit)
	  --direction up|down|both  which direction carries the impairment: up
	                  is from the shell to the host only (the shell's egress,
	                  as tc on a device's interface shapes it), down the
	                  other way; the clean direction adds no delay or loss
	                  but is counted. Default both
	  --queue Q       the queue in front of the rate: NAME[,bytes=N][,packets=N]
	                  with NAME droptail or drophead (droptail,bytes=30000;
	                  a bare size means drop-tail in bytes). Default:
	                  drop-tail of one bandwidth-delay product
	  --mtu N         MTU (default 1500)
	  --pcap FILE     capture the shell's interface (raw IP pcap)
	  --cc NAME       TCP congestion control inside the shell (cubic, bbr, reno)
	  --seed N        seed of the random decisions (0: random)
	  --stats json    print the counters as JSON instead of a table
	  -v              log setup and teardown

  iotq link up [-v] TOPOLOGY.yaml
	Builds the nodes, links and shared media of a topology file (same
	words: 25ms, 20mbit, 5%) and forwards until Ctrl-C. Reach a node with
	"ip netns exec NAMESPACE CMD"; the namespaces and addresses are printed.
	The file format is in docs/link.md.

  iotq link down
	Stops running "iotq link up" processes and removes namespaces left
	behind by crashed runs (prefix iotq-). Namespaces of live processes that
	are not "iotq link up" (a lab run) are left alone.

  iotq link stats [--json]
	Prints the counters of every running "iotq link up".
`,
		Flags: newFlagSet("link"),
	}
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) == 0 {
			return usageErrorf("link needs a subcommand: shell, up, down or stats")
		}
		switch args[0] {
		case "shell":
			return a.linkShell(ctx, args[1:])
		case "up":
			return a.linkUp(ctx, args[1:])
		case "down":
			return a.linkDown(ctx, args[1:])
		case "stats":
			return a.linkStats(args[1:])
		}
		return usageErrorf("unknown link subcommand %q: use shell, up, down or stats", args[0])
	})
	return c
}

func (a *app) linkLogger(verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return levelLogger(a.stderr, level)
}

func newSubFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func (a *app) linkShell(ctx context.Context, args []string) error {
	fs := newSubFlags("link shell")
	profile := fs.String("profile", "", "")
	delay := fs.String("delay", "", "")
	rtt := fs.String("rtt", "", "")
	jitter := fs.String("jitter", "", "")
	jitterDist := fs.String("jitter-dist", "", "")
	loss := fs.String("loss", "", "")
	ge := fs.String("ge", "", "")
	rate := fs.String("rate", "", "")
	queue := fs.String("queue", "", "")
	direction := fs.String("direction", "both", "")
	mtu := fs.Int("mtu", 0, "")
	pcap := fs.String("pcap", "", "")
	cc := fs.String("cc", "", "")
	seed := fs.Uint64("seed", 0, "")
	stats := fs.String("stats", "table", "")
	verbose := fs.Bool("v", false, "")
	if err := parseSub(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageErrorf("link shell needs a command after --, for example: iotq link shell --profile wifi -- sh")
	}
	var p link.Params
	if *profile != "" {
		pr, err := link.ProfileByName(*profile)
		if err != nil {
			return usageErrorf("%v", err)
		}
		p = pr.OneWay()
	}
	if *delay != "" && *rtt != "" {
		return usageErrorf("give --delay (one-way) or --rtt (round trip), not both")
	}
	if *delay != "" {
		d, err := link.ParseDuration("--delay", *delay)
		if err != nil {
			return usageErrorf("%v", err)
		}
		p.Delay = d
	}
	if *rtt != "" {
		d, err := link.ParseDuration("--rtt", *rtt)
		if err != nil {
			return usageErrorf("%v", err)
		}
		p.Delay = d / 2
	}
	if *jitter != "" {
		d, err := link.ParseDuration("--jitter", *jitter)
		if err != nil {
			return usageErrorf("%v", err)
		}
		p.Jitter = d
	}
	p.JitterDist = *jitterDist
	if *loss != "" {
		l, err := link.ParseLoss(*loss)
		if err != nil {
			return usageErrorf("--loss: %v", err)
		}
		p.Loss = l
	}
	if *ge != "" {
		g, err := link.ParseGE(*ge)
		if err != nil {
			return usageErrorf("--ge: %v", err)
		}
		p.GilbertElliott = &g
	}
	if *rate != "" {
		r, err := link.ParseRate(*rate)
		if err != nil {
			return usageErrorf("--rate: %v", err)
		}
		p.Rate = r
	}
	if *queue != "" {
		q, err := link.ParseQueue(*queue)
		if err != nil {
			return usageErrorf("--queue: %v", err)
		}
		if q.Name == "" && q.Packets == 0 { // a bare size: drop-tail in bytes
			p.QueueBytes = q.Bytes
		} else {
			p.Queue = q
		}
	}
	p.MTU = *mtu
	if err := p.Validate("link shell"); err != nil {
		return usageErrorf("%v", err)
	}
	dir, err := link.ParseDirection(*direction)
	if err != nil {
		return usageErrorf("--direction: %v", err)
	}
	if *stats != "table" && *stats != "json" {
		return usageErrorf("--stats %q: use table or json", *stats)
	}
	if err := lookCommand(argv[0]); err != nil {
		return err
	}
	if err := link.Preflight(); err != nil {
		return err
	}
	switch dir {
	case link.DirectionUp:
		fmt.Fprintf(a.stderr, "iotq link shell: shell->host %s, host->shell clean (RTT %v)\n", p, p.Delay)
	case link.DirectionDown:
		fmt.Fprintf(a.stderr, "iotq link shell: host->shell %s, shell->host clean (RTT %v)\n", p, p.Delay)
	default:
		fmt.Fprintf(a.stderr, "iotq link shell: %s each way (RTT %v)\n", p, 2*p.Delay)
	}
	// Ctrl-C reaches CMD through the terminal (an interactive shell ignores
	// it at its prompt), so only SIGTERM and SIGHUP end the session early.
	_ = ctx
	sctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	res, err := link.Shell(sctx, link.ShellConfig{
		Up: p, Down: p, Direction: dir, CongestionControl: *cc, Pcap: *pcap,
		Options: link.Options{Logger: a.linkLogger(*verbose), Seed: *seed, RealTimeProcess: true},
		Stdout:  a.stdout, Stderr: a.stderr,
	}, argv)
	if err != nil {
		return err
	}
	if !res.RealTime {
		fmt.Fprintln(a.stderr, "iotq link shell: notice: no real-time priority for the forwarding thread; delays may be up to ~1 ms late under load")
	}
	for _, e := range res.Ends {
		if e.TxDropped > 0 {
			fmt.Fprintf(a.stderr, "iotq link shell: warning: the kernel dropped %d packets at %s's interface before the emulator read them\n", e.TxDropped, e.Node)
		}
	}
	if *stats == "json" {
		b, _ := json.Marshal(map[string]any{"exit_code": res.ExitCode, "host_addr": res.HostAddr,
			"congestion_control": res.CongestionControl, "seed": res.Seed, "links": res.Stats, "ends": res.Ends})
		fmt.Fprintln(a.stderr, string(b))
	} else {
		fmt.Fprintf(a.stderr, "iotq link shell: exit code %d, congestion control %s, seed %d\n", res.ExitCode, res.CongestionControl, res.Seed)
		_ = link.WriteStats(a.stderr, res.Stats)
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}

func (a *app) linkUp(ctx context.Context, args []string) error {
	fs := newSubFlags("link up")
	verbose := fs.Bool("v", false, "")
	if err := parseSub(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("link up needs one topology file: iotq link up TOPOLOGY.yaml")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("read topology: %w", err)
	}
	tf, err := link.ParseTopology(fs.Arg(0), data)
	if err != nil {
		return err
	}
	if err := link.Preflight(); err != nil {
		return err
	}
	// This process is a dedicated emulator: all its threads may run at
	// real-time priority (child processes stay normal).
	opts := link.Options{Prefix: tf.Prefix, Seed: tf.Seed, CongestionControl: tf.CongestionControl,
		Logger: a.linkLogger(*verbose), RealTimeProcess: true}
	n, err := link.Up(ctx, tf.Topology, opts)
	if err != nil {
		return err
	}
	defer n.Close()
	info := n.Info()
	prefix := tf.Prefix
	if prefix == "" {
		prefix = link.DefaultPrefix
	}
	state := link.RunState{Info: info, Prefix: prefix, Started: time.Now()}
	defer link.RemoveRunState(info.PID)
	for _, nd := range info.Nodes {
		ns := nd.Namespace
		if ns == "" {
			ns = "(host)"
		}
		fmt.Fprintf(a.stdout, "node %-12s namespace %s", nd.Name, ns)
		for l, addr := range nd.Addrs {
			fmt.Fprintf(a.stdout, "  %s=%s", l, addr)
		}
		fmt.Fprintln(a.stdout)
	}
	if ok, _ := n.RealTime(); !ok {
		fmt.Fprintln(a.stderr, "iotq link up: notice: no real-time priority for the forwarding thread; delays may be up to ~1 ms late under load")
	}
	fmt.Fprintln(a.stdout, "forwarding; Ctrl-C (or iotq link down) stops")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		state.Updated = time.Now()
		state.Stats = n.Stats()
		if err := link.WriteRunState(state); err != nil {
			fmt.Fprintf(a.stderr, "iotq link up: %v\n", err)
		}
		select {
		case <-ctx.Done():
			_ = link.WriteStats(a.stdout, n.Stats())
			return n.Close()
		case <-tick.C:
		}
	}
}

func (a *app) linkDown(ctx context.Context, args []string) error {
	fs := newSubFlags("link down")
	prefix := fs.String("prefix", link.DefaultPrefix, "")
	if err := parseSub(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("usage: iotq link down [--prefix P]")
	}
	if err := link.Preflight(); err != nil {
		return err
	}
	pids, err := link.StopRuns(15 * time.Second)
	for _, pid := range pids {
		fmt.Fprintf(a.stdout, "stopped iotq link up (pid %d)\n", pid)
	}
	if err != nil {
		return err
	}
	removed, err := link.Cleanup(ctx, *prefix)
	for _, ns := range removed {
		fmt.Fprintf(a.stdout, "removed stale namespace %s\n", ns)
	}
	if err != nil {
		return err
	}
	left, _ := link.Namespaces(*prefix)
	for _, ns := range left {
		fmt.Fprintf(a.stdout, "left alone: %s (its process %d is alive)\n", ns, link.OwnerPID(*prefix, ns))
	}
	if len(pids)+len(removed) == 0 {
		fmt.Fprintln(a.stdout, "nothing to remove")
	}
	return nil
}

func (a *app) linkStats(args []string) error {
	fs := newSubFlags("link stats")
	asJSON := fs.Bool("json", false, "")
	if err := parseSub(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("usage: iotq link stats [--json]")
	}
	runs, err := link.RunStates()
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return errors.New("no iotq link up is running (start one with: iotq link up TOPOLOGY.yaml)")
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(runs)
	}
	for _, r := range runs {
		fmt.Fprintf(a.stdout, "iotq link up pid %d (%s), updated %s\n", r.PID, r.ID, r.Updated.Format(time.TimeOnly))
		if err := link.WriteStats(a.stdout, r.Stats); err != nil {
			return err
		}
	}
	return nil
}

// Exit codes of a command that could not be run, as a POSIX shell returns
// them: a script tells "no such command" from the command's own failure.
const (
	exitNotExecutable = 126
	exitNotFound      = 127
)

// lookCommand finds CMD of `link shell -- CMD` before a namespace is made
// for it (the namespace shares the host's files and PATH): a missing
// command exits 127, one that cannot be executed 126, like a shell.
func lookCommand(name string) error {
	_, err := exec.LookPath(name)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &exitError{code: exitNotFound, msg: fmt.Sprintf("%s: command not found (not in PATH, or no such file)", name)}
	default:
		return &exitError{code: exitNotExecutable, msg: fmt.Sprintf("%s: cannot execute: %v", name, err)}
	}
}
