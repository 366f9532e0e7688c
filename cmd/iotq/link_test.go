package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotq/iotq/internal/testutil"
)

func TestLinkShellFlagErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown direction", []string{"--direction", "sideways"}, `--direction: direction "sideways" is unknown: use up`},
		{"unknown queue", []string{"--queue", "codel"}, `--queue: queue "codel": unknown discipline "codel": use one of drophead, droptail`},
		{"unknown queue argument", []string{"--queue", "droptail,limit=3"}, `unknown argument "limit": use bytes= or packets=`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"link", "shell"}, c.args...)
			code, _, stderr := runCLI(context.Background(), append(args, "--", "true")...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, c.want)
			}
		})
	}
}

// TestLinkShellDirectionAndQueue runs a command behind an emulated link
// impaired from the shell to the host only, with a drop-head queue.
func TestLinkShellDirectionAndQueue(t *testing.T) {
	testutil.RequireNetAdmin(t)
	code, _, stderr := runCLI(t.Context(), "link", "shell", "--delay", "10ms", "--rate", "1mbit", "--direction", "up",
		"--queue", "drophead,packets=10", "--stats", "json", "--", "true")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"shell->host delay 10ms rate 1mbit queue drophead,packets=10, host->shell clean (RTT 10ms)",
		`"queue":"drophead,packets=10"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestLinkShellCommandNotRun: like a shell, a command that is not there
// exits 127 and one that cannot be executed 126, so a script tells them
// from the command's own failure (issue 22 item 2); a command's own exit
// code passes through.
func TestLinkShellCommandNotRun(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "plain.txt")
	if err := os.WriteFile(notExec, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  string
		code int
		want string
	}{
		{"iotq-no-such-command", 127, "iotq-no-such-command: command not found"},
		{filepath.Join(t.TempDir(), "missing"), 127, "command not found"},
		{notExec, 126, "cannot execute"},
	} {
		code, _, stderr := runCLI(t.Context(), "link", "shell", "--delay", "1ms", "--", c.cmd)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("link shell -- %s: exit %d, stderr %q; want %d and %q", c.cmd, code, stderr, c.code, c.want)
		}
	}
	testutil.RequireNetAdmin(t)
	code, _, stderr := runCLI(t.Context(), "link", "shell", "--delay", "1ms", "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Errorf("link shell -- sh -c 'exit 3': exit %d, want 3: %s", code, stderr)
	}
}
