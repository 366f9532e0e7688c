package main

import (
	"context"
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
