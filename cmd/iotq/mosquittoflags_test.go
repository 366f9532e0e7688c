package main

// Mosquitto's short flags (issue 22 item 1): users bring
// `mosquitto_pub -h HOST -p PORT -t T -m M` habits; iotq pub/sub accept
// them with their meaning, and refuse the ones they cannot honour with a
// message naming the iotq way, never "help and exit 0".

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWithHostPort(t *testing.T) {
	for _, tc := range []struct {
		in, host string
		port     int
		want     string
	}{
		{"mqtt://127.0.0.1:1883", "10.0.0.2", 0, "mqtt://10.0.0.2:1883"},
		{"mqtt://127.0.0.1:1883", "", 11883, "mqtt://127.0.0.1:11883"},
		{"quic://broker.example:14567", "::1", 4567, "quic://[::1]:4567"},
		{"ws://127.0.0.1:8080/mqtt", "", 9090, "ws://127.0.0.1:9090/mqtt"},
		{"coap://127.0.0.1", "10.1.1.1", 0, "coap://10.1.1.1"},
	} {
		got, err := withHostPort(tc.in, tc.host, tc.port)
		if err != nil || got != tc.want {
			t.Errorf("withHostPort(%q, %q, %d) = %q, %v; want %q", tc.in, tc.host, tc.port, got, err, tc.want)
		}
	}
}

func TestMosquittoShortFlags(t *testing.T) {
	u, err := url.Parse(startMosquittoCLI(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port := u.Hostname(), u.Port()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ready := filepath.Join(t.TempDir(), "ready")
	sub := startCLI(ctx, "sub", "-h", host, "-p", port, "-i", "mosq-sub", "-t", "mosq/#", "-C", "3", "-v", "-q", "1",
		"--ready-file", ready)
	waitFile(t, ready)

	if code, _, stderr := runCLI(ctx, "pub", "-h", host, "-p", port, "-i", "mosq-pub", "-k", "30", "-t", "mosq/a", "-m", "plain", "-q", "1"); code != 0 {
		t.Fatalf("pub -h -p -i -k: exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(file, []byte("from-file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(ctx, "pub", "-h", host, "-p", port, "-t", "mosq/b", "-f", file, "-q", "1"); code != 0 {
		t.Fatalf("pub -f: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(ctx, "pub", "-h", host, "-p", port, "-t", "mosq/c", "-m", "", "-q", "1"); code != 0 {
		t.Fatalf("pub -m '' (an empty message): exit %d: %s", code, stderr)
	}
	sub.wait(t)
	stdout := sub.out.String()
	if sub.code != 0 {
		t.Fatalf("sub -C 3: exit %d: %s", sub.code, sub.errb.String())
	}
	for _, want := range []string{"mosq/a plain", "mosq/b from-file", "mosq/c"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sub output lacks %q:\n%s", want, stdout)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pub", "-h", host, "-p", port, "-t", "x", "-l"}, "--gate stdin"},
		{[]string{"pub", "-p", "70000", "-t", "x", "-m", "y"}, "port from 1 to 65535"},
		{[]string{"pub", "-k", "0", "-t", "x", "-m", "y"}, "--keepalive"},
		{[]string{"pub", "-t", "x", "-m", "y", "-f", file}, "one of -m MESSAGE, -f FILE, -s or --size N"},
	} {
		code, _, stderr := runCLI(ctx, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("iotq %s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
