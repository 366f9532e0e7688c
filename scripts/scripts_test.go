package scripts

import (
	"errors"
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
