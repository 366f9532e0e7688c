package main

// Help and exit codes (issue 22 item 2): every subcommand's -h/--help
// prints its usage on standard output and exits 0; usage errors exit 2 and
// say what to write instead.

import (
	"context"
	"strings"
	"testing"
)

func TestSubcommandHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"link", "shell", "--help"}, {"link", "up", "--help"}, {"link", "down", "-h"}, {"link", "stats", "-h"},
		{"lab", "run", "-h"}, {"lab", "show", "-h"}, {"lab", "list", "-h"},
		{"broker", "passwd", "--help"}, {"pub", "-h"}, {"sub", "--help"}, {"pub", "-t", "x", "-h"},
	} {
		code, stdout, stderr := runCLI(context.Background(), args...)
		if code != exitOK || !strings.HasPrefix(stdout, "usage: iotq "+args[0]) {
			t.Errorf("iotq %s: exit %d, stdout %.60q, stderr %.80q; want exit 0 and the usage", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sub", "-t", "a/#/b"}, "'#' must be a whole level"},
		{[]string{"sub", "-t", "a/b#"}, "'#' must be a whole level"},
		{[]string{"sub", "-t", "a/b+/c"}, "'+' must be a whole level"},
		{[]string{"pub", "-t", "bad/\xc3\x28", "-m", "x"}, "not valid UTF-8"},
		{[]string{"pub", "-t", "a/+", "-m", "x"}, "wildcards belong in subscription filters"},
		{[]string{"pub", "-t", "a", "-m", "x", "--timeout", "2"}, "2s, 500ms"},
		{[]string{"pub", "-t", "a", "-m", "x", "--interval", "1"}, "2s, 500ms"},
		{[]string{"pub", "-t", "a", "--size", "300MB"}, "-size 300000000; but an MQTT packet carries at most 268435455 bytes (256 MiB)"},
		{[]string{"pub", "-t", "a", "--size", "64KiB"}, "write a whole number without units: -size 65536)"},
		{[]string{"pub", "-t", "a", "--size", "12abc"}, "write a whole number, e.g. -size 300; no units"},
		{[]string{"sub", "-t", "a", "--timeout", "2"}, "2s, 500ms"},
		{[]string{"link", "shell", "--no-such"}, "flag provided but not defined"},
		{[]string{"version", "extra"}, "takes none"},
		// A CoAP URL names the server; the topic is -t (README: URLs).
		{[]string{"pub", "--url", "coap://127.0.0.1/sensors/t1", "-t", "a", "-m", "x"}, "a CoAP URL names the server only; give the topic with -t"},
		{[]string{"sub", "--url", "coap+tcp://127.0.0.1/t/sensors/t1", "-t", "a"}, "-t sensors/t1 uses the resource /t/sensors/t1"},
		// A lab flag that makes a valid scenario invalid is a usage error.
		{[]string{"lab", "run", "--transports", "mqtts,http", "smoke"}, `transports[1]: "http": want a broker URL scheme`},
		{[]string{"lab", "show", "--transports", "amqps", "--qos", "2", "smoke"}, "AMQP has at-most-once (0) and at-least-once (1) only"},
		{[]string{"lab", "run", "--qos", "x", "smoke"}, "want numbers 0, 1 or 2"},
		{[]string{"lab", "run", "no-such-scenario"}, "unknown scenario"},
	} {
		code, _, stderr := runCLI(context.Background(), tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("iotq %q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
