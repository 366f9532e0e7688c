package scripts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptsParse: every scripts/*.sh is valid bash (bash -n).
func TestScriptsParse(t *testing.T) {
	files, err := filepath.Glob("*.sh")
	if err != nil || len(files) < 3 {
		t.Fatalf("found %d scripts (%v); is the working directory scripts/?", len(files), err)
	}
	for _, f := range files {
		if out, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", f, err, out)
		}
	}
}

// TestBenchThroughputHelp: --help prints the header comment (usage,
// brokers, outputs) and nothing of the script itself.
func TestBenchThroughputHelp(t *testing.T) {
	out, err := exec.Command("bash", "bench-throughput.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("bench-throughput.sh --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, want := range []string{
		"Usage: scripts/bench-throughput.sh [--tiny]",
		"mosquitto", "iotq-mqtt-none", "iotq-mqtt-bolt", "iotq-quic-none", "mqtt5-tcp", "mqtt5-quic",
		"IOTQ_BASE", "runs.csv", "latency.csv", "idle.csv", "summary.md", "summary.json",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "set -euo") || strings.Contains(help, "# ") {
		t.Errorf("--help leaks script lines or comment markers:\n%s", help)
	}
}

// TestBenchThroughputRefusesBadArguments: mistakes stop the script with
// status 2 before it starts a broker.
func TestBenchThroughputRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--bogus"}, "unknown argument --bogus"},
		{[]string{"ROUNDS=three"}, nil, "ROUNDS=three: want a whole number"},
		{[]string{"RUN_TIMEOUT=5"}, nil, "RUN_TIMEOUT=5 is too short"},
		{[]string{"PIN=1", "BROKER_CPUS=first"}, nil, "BROKER_CPUS=first: want a CPU list"},
		{[]string{"PROFILE=1", "DURATION=1"}, nil, "PROFILE=1 needs DURATION of 2 s or more"},
	} {
		cmd := exec.Command("bash", append([]string{"bench-throughput.sh"}, c.args...)...)
		cmd.Env = append(cmd.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v %v: exit %v, want status 2\n%s", c.env, c.args, err, out)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%v %v: output lacks %q:\n%s", c.env, c.args, c.want, out)
		}
	}
}

// fakeLab is an iotq stand-in for run-campaigns.sh: "lab run ... --out
// DIR" notes its arguments in DIR/runs.txt; without --resume it then hangs
// (a stuck campaign), with --resume it finishes; FAKE_EXIT sets its status.
const fakeLab = `#!/usr/bin/env bash
out=""; resume=0; prev=""
for a in "$@"; do
	[ "$prev" = --out ] && out=$a
	[ "$a" = --resume ] && resume=1
	prev=$a
done
mkdir -p "$out"
echo "$*" >> "$out/runs.txt"
if [ $resume = 0 ] && [ -z "${FAKE_EXIT:-}" ]; then ulimit -c 0; exec sleep 60; fi
exit ${FAKE_EXIT:-0}
`

func runCampaigns(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "iotq")
	if err := os.WriteFile(fake, []byte(fakeLab), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "campaigns.log")
	cmd := exec.Command("bash", append([]string{"run-campaigns.sh"}, args...)...)
	cmd.Env = append(cmd.Environ(), append([]string{"IOTQ=" + fake, "LOG=" + log, "POLL_SECONDS=1"}, env...)...)
	cmd.Dir = "."
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	return string(out), string(b), code
}

// TestRunCampaignsRestartsAStalledCampaign: a campaign whose results
// directory stops changing is stopped, its thread states written beside
// the results, and run again with --resume.
func TestRunCampaignsRestartsAStalledCampaign(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	_, log, code := runCampaigns(t, []string{"STALL_SECONDS=2"}, "e1 --out "+out+" --jobs 4")
	if code != 0 {
		t.Fatalf("exit %d, want 0; log:\n%s", code, log)
	}
	runs, err := os.ReadFile(filepath.Join(out, "runs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(runs)), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "--resume") || !strings.HasSuffix(lines[1], "--jobs 4 --resume") {
		t.Fatalf("runs %q, want the campaign, then the same with --resume", lines)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "stall-*.txt")); len(m) != 1 {
		t.Errorf("stall diagnostics %v, want one file", m)
	}
	for _, want := range []string{"stalled for 2 s", "SIGQUIT", "(attempt 2)", out + ": exit 0", "all done"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestRunCampaignsReportsAFailedCampaign: a campaign that exits non-zero
// is not restarted, the next one still runs, and the status is 1; a
// campaign without --out is refused before anything starts.
func TestRunCampaignsReportsAFailedCampaign(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	_, log, code := runCampaigns(t, []string{"FAKE_EXIT=3"}, "e1 --out "+a, "e2 --out "+b)
	if code != 1 || !strings.Contains(log, a+": exit 3") || !strings.Contains(log, b+": exit 3") || strings.Contains(log, "attempt 2") {
		t.Fatalf("exit %d, want 1, both campaigns run once; log:\n%s", code, log)
	}
	out, _, code := runCampaigns(t, nil, "e1 --jobs 4")
	if code != 2 || !strings.Contains(out, "name the results directory with --out DIR") {
		t.Fatalf("campaign without --out: exit %d, want 2:\n%s", code, out)
	}
}

// TestKeepRecordsRoundTrip: keep stores a results directory's campaign
// files and its finished cells' records, never broker-state (private
// keys), pcaps, logs or unfinished cells; restore brings them back byte
// for byte and refuses a directory that is not empty.
func TestKeepRecordsRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Fatalf("xz not found (apt-get install xz-utils): %v", err)
	}
	res := filepath.Join(t.TempDir(), "e4-s2")
	files := map[string]string{
		"campaign.json":                           `{"scenario":"e4"}`,
		"scenario.yaml":                           "experiment: E4\n",
		"manifest.json":                           `{"shard":"1/1"}`,
		"cells/A/messages.csv":                    "# records 8\nrep,seq\n1,1\n",
		"cells/A/completions.csv":                 "# records 8\nrep,ms\n1,5\n",
		"cells/A/done.json":                       `{"reps":1}`,
		"cells/A/pub.pcap":                        "pcap",
		"cells/A/broker.stderr":                   "log",
		"cells/A/broker-state/tls/server-key.pem": "PRIVATE",
		"cells/A/rep-1/pub.csv":                   "raw",
		"cells/B/messages.csv":                    "# unfinished\n",
	}
	for name, body := range files {
		p := filepath.Join(res, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(t.TempDir(), "kept")
	run := func(args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{"keep-records.sh"}, args...)...)
		cmd.Env = append(cmd.Environ(), "CAMPAIGN_RECORDS="+store)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("keep", res); err != nil || !strings.Contains(out, "1 finished cells") {
		t.Fatalf("keep: %v\n%s", err, out)
	}
	dst := filepath.Join(t.TempDir(), "back")
	if out, err := run("restore", "e4-s2", dst); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	kept := []string{"campaign.json", "scenario.yaml", "manifest.json", "cells/A/messages.csv", "cells/A/completions.csv", "cells/A/done.json"}
	for _, name := range kept {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != files[name] {
			t.Errorf("%s restored as %q (%v), want %q", name, b, err, files[name])
		}
	}
	var got []string
	_ = filepath.WalkDir(dst, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel)
		}
		return nil
	})
	if len(got) != len(kept) {
		t.Errorf("restored %v, want only %v", got, kept)
	}
	if out, err := run("restore", "e4-s2", dst); err == nil || !strings.Contains(out, "is not empty") {
		t.Errorf("restore into a full directory: %v\n%s", err, out)
	}
	if out, err := run("keep", t.TempDir()); err == nil || !strings.Contains(out, "campaign.json not found") {
		t.Errorf("keep of a directory that holds no campaign: %v\n%s", err, out)
	}
}
