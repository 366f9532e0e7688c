package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabCommandExitCodes runs `iotq lab` in-process: everything that needs
// no child processes.
func TestLabCommandExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("experiment: x\nlosses: [0, 200]\nqos: [7]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shard1, shard2 := filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"list names the built-ins", []string{"lab", "list"}, exitOK, "smoke"},
		{"show resolves a scaled built-in", []string{"lab", "show", "e1", "--scale", "reduced", "--losses", "0,5"}, exitOK, "# 12 cells"},
		{"check counts a shard", []string{"lab", "run", "e4", "--shard", "2/4", "--check"}, exitOK, "108 cells, 27 in shard 2/4"},
		{"list estimates the wall time for a scale and jobs", []string{"lab", "list", "--scale", "reduced", "--jobs", "4"}, exitOK, "at scale reduced, --jobs 4"},
		{"show estimates the wall time", []string{"lab", "show", "e1", "--jobs", "36"}, exitOK, "with --jobs 36 ("},
		{"check estimates with jobs", []string{"lab", "run", "e1", "--jobs", "6", "--check"}, exitOK, "with --jobs 6"},
		{"too many jobs", []string{"lab", "run", "smoke", "--jobs", "65", "--check"}, exitUsage, "--jobs 65"},
		{"zero jobs", []string{"lab", "list", "--jobs", "0"}, exitUsage, "--jobs 0"},
		{"no subcommand", []string{"lab"}, exitUsage, "missing subcommand"},
		{"unknown subcommand", []string{"lab", "fly"}, exitUsage, "unknown subcommand"},
		{"no scenario", []string{"lab", "run"}, exitUsage, "needs a scenario"},
		{"unknown scenario is a usage error listing the known ones", []string{"lab", "run", "nosuch", "--check"}, exitUsage, "e1, e1-both, "},
		{"unknown scenario to run is a usage error", []string{"lab", "run", "nosuch", "--out", filepath.Join(dir, "nosuch")}, exitUsage, `unknown scenario "nosuch"`},
		{"unknown scenario to show is a usage error", []string{"lab", "show", "nosuch"}, exitUsage, `unknown scenario "nosuch"`},
		{"list takes no scenario", []string{"lab", "list", "nosuch"}, exitUsage, "iotq lab show nosuch"},
		{"missing scenario file is a usage error", []string{"lab", "show", filepath.Join(dir, "none.yaml")}, exitUsage, "unknown scenario"},
		{"bad file names fields and lines", []string{"lab", "run", bad, "--check"}, exitFailure, "bad.yaml:2: losses"},
		{"bad scale", []string{"lab", "run", "smoke", "--scale", "huge", "--check"}, exitUsage, "--scale"},
		{"bad shard", []string{"lab", "run", "smoke", "--shard", "3/2", "--check"}, exitUsage, "--shard"},
		{"bad loss override", []string{"lab", "show", "smoke", "--losses", "x"}, exitUsage, "--losses"},
		{"show lists the early start and its broker 0-RTT policy", []string{"lab", "show", "e5", "--profiles", "wifi", "--losses", "0"}, exitOK, "E5_wifi_loss0_reconnect-early_qos1_32B_quic_0rtt-accept"},
		{"0-RTT policy override", []string{"lab", "run", "e5", "--quic-0rtt", "refuse", "--check"}, exitOK, "72 cells"},
		{"bad 0-RTT policy override is a usage error", []string{"lab", "run", "e5", "--quic-0rtt", "sometimes", "--check"}, exitUsage, "quic_0rtt[0]"},
		{"bad fabric", []string{"lab", "run", "smoke", "--fabric", "moon", "--out", filepath.Join(dir, "o")}, exitUsage, "--fabric"},
		{"merge needs dirs", []string{"lab", "merge", filepath.Join(dir, "m")}, exitUsage, "merge needs"},
		{"merge of non-results", []string{"lab", "merge", filepath.Join(dir, "m2"), shard1, shard2}, exitFailure, "not a results directory"},
		{"pool needs two dirs", []string{"lab", "pool", filepath.Join(dir, "p"), shard1}, exitUsage, "pool needs"},
		{"pool of non-results", []string{"lab", "pool", filepath.Join(dir, "p2"), shard1, shard2}, exitFailure, "not a results directory"},
		{"seed not a number", []string{"lab", "run", "smoke", "--seed", "x"}, exitUsage, "seed"},
		{"bad log level, even with --check", []string{"lab", "run", "smoke", "--log-level", "bogus", "--check"}, exitUsage, "--log-level"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var so, se bytes.Buffer
			code := newApp(&so, &se).run(context.Background(), c.args)
			if code != c.code || !strings.Contains(so.String()+se.String(), c.want) {
				t.Errorf("exit %d (want %d, %q)\nstdout: %s\nstderr: %s", code, c.code, c.want, so.String(), se.String())
			}
		})
	}
}

// TestLabShowPrintsResolvedValues: lab show prints the values a run will
// use (seed 1, cubic, grace 3s, the topology's kind), not the file's zero
// values, and lab list's estimate for smoke is the calibrated one (it ran
// 37 s one cell at a time; the old estimate said 5 minutes).
func TestLabShowPrintsResolvedValues(t *testing.T) {
	var so, se bytes.Buffer
	if code := newApp(&so, &se).run(context.Background(), []string{"lab", "show", "smoke"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	out := so.String()
	for _, want := range []string{"\nseed: 1\n", "\ntcp_congestion: cubic\n", "\ngrace: 3s\n", "  kind: pub-broker-sub\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab show smoke lacks %q", want)
		}
	}
	for _, zero := range []string{"\nseed: 0\n", "tcp_congestion: \"\"", "\ngrace: 0s\n"} {
		if strings.Contains(out, zero) {
			t.Errorf("lab show smoke prints the unresolved %q", zero)
		}
	}
	so.Reset()
	if code := newApp(&so, &se).run(context.Background(), []string{"lab", "list"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	for _, line := range strings.Split(so.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "smoke" && !strings.HasSuffix(f[2], "s") {
			t.Errorf("lab list estimates smoke at %s; it runs in well under a minute", f[2])
		}
	}
}
