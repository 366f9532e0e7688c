package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// TestPubSubOverQUICWith0RTT: pub and sub over every transport of our
// broker; over QUIC a second pub with the same --session-cache reports
// used_0rtt and tls_resumed in --stats json and its message is delivered.
func TestPubSubOverQUICWith0RTT(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{
		Listen:   []string{"mqtt://127.0.0.1:0", "mqtts://127.0.0.1:0", "wss://127.0.0.1:0", "quic://127.0.0.1:0"},
		StateDir: t.TempDir(),
	})
	ca := srv.CAFile()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	sub := startCLI(ctx, "sub", "--url", brokertest.Endpoint(t, srv, "mqtt"), "-t", "z/#", "-q", "1", "-n", "7",
		"--timeout", "20s", "--stats", "json", "--quiet", "--ready-file", ready)
	waitFile(t, ready)

	cache := filepath.Join(dir, "tickets")
	runs := []struct {
		scheme   string
		want0RTT bool
		resumed  bool
	}{
		{"mqtts", false, false},
		{"wss", false, false},
		{"quic", false, false},
		{"quic", true, true},
		{"mqtts", false, true}, // TLS over TCP resumes from the same file, no early data
		{"quic", true, true},   // --early -q 0: PUBLISH in the 0-RTT flight with CONNECT
		{"quic", true, true},   // --early -q 1: the same, its receipt on the PUBACK
	}
	for i, r := range runs {
		args := []string{"pub", "--url", brokertest.Endpoint(t, srv, r.scheme), "--ca", ca, "--session-cache", cache,
			"-t", fmt.Sprintf("z/%d", i), "--size", "32", "--stats", "json"}
		switch i {
		case len(runs) - 2:
			args = append(args, "--early", "-q", "0")
		case len(runs) - 1:
			args = append(args, "--early", "-q", "1")
		default:
			args = append(args, "-q", "1")
		}
		code, out, errOut := runCLI(ctx, args...)
		if code != 0 {
			t.Fatalf("run %d (%s): exit %d: %s", i, r.scheme, code, errOut)
		}
		st := lastJSON(t, out)
		if st["transport"] != r.scheme || st["used_0rtt"] != r.want0RTT || st["tls_resumed"] != r.resumed || st["acked"] != 1.0 {
			t.Fatalf("run %d (%s): stats transport %v used_0rtt %v tls_resumed %v acked %v; want %s %v %v 1",
				i, r.scheme, st["transport"], st["used_0rtt"], st["tls_resumed"], st["acked"], r.scheme, r.want0RTT, r.resumed)
		}
		if r.scheme == "quic" && st["quic"] == nil {
			t.Fatalf("run %d: no quic stats", i)
		}
		if i >= len(runs)-2 {
			early, _ := st["early_sent_ns"].(float64)
			if early == 0 || early > st["connack_ns"].(float64) {
				t.Fatalf("--early: early_sent_ns %v, connack_ns %v", st["early_sent_ns"], st["connack_ns"])
			}
		}
	}
	sub.wait(t)
	if sub.code != 0 {
		t.Fatalf("sub exit %d: %s", sub.code, sub.errb.String())
	}
	if st := lastJSON(t, sub.out.String()); st["received"] != 7.0 {
		t.Fatalf("sub received %v, want 7", st["received"])
	}
}

// TestSubEcho: sub --echo publishes every measurement message it receives
// unchanged to the echo topic; a second sub on that topic sees each once,
// with delay_ns from the original send time (the round trip), at least
// the receiver's own delay.
func TestSubEcho(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir()})
	url := brokertest.Endpoint(t, srv, "mqtt")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	back := startCLI(ctx, "sub", "--url", url, "-t", "rt/back", "-q", "1", "-n", "5", "--timeout", "20s", "--quiet",
		"--records", filepath.Join(dir, "back.csv"), "--ready-file", filepath.Join(dir, "back.ready"))
	waitFile(t, filepath.Join(dir, "back.ready"))
	echo := startCLI(ctx, "sub", "--url", url, "-t", "rt/go", "-q", "1", "-n", "5", "--timeout", "20s", "--quiet",
		"--records", filepath.Join(dir, "go.csv"), "--echo", "rt/back", "--ready-file", filepath.Join(dir, "go.ready"))
	waitFile(t, filepath.Join(dir, "go.ready"))
	if code, _, errOut := runCLI(ctx, "pub", "--url", url, "-t", "rt/go", "-q", "1", "--size", "64", "-n", "5"); code != 0 {
		t.Fatalf("pub: %s", errOut)
	}
	echo.wait(t)
	back.wait(t)
	if echo.code != 0 || back.code != 0 {
		t.Fatalf("echo exit %d (%s), back exit %d (%s)", echo.code, echo.errb.String(), back.code, back.errb.String())
	}
	there, rt := readCSV(t, filepath.Join(dir, "go.csv")), readCSV(t, filepath.Join(dir, "back.csv"))
	if len(there) != 6 || len(rt) != 6 {
		t.Fatalf("rows: %d there, %d back (want 5 + header each)", len(there), len(rt))
	}
	// seq, size, send_ns, recv_ns, delay_ns: the same message with the same
	// send time, received later than at the echoing subscriber
	num := func(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
	got := map[string][]string{}
	for _, r := range there[1:] {
		got[r[0]] = r
	}
	for _, r := range rt[1:] {
		g := got[r[0]]
		if g == nil || r[2] != g[2] || r[1] != "64" || num(r[4]) < num(g[4]) || num(r[4]) <= 0 {
			t.Errorf("echo of seq %s: %v, at the echoing subscriber %v", r[0], r, g)
		}
	}
	if code, _, _ := runCLI(ctx, "sub", "--url", url, "-t", "a", "--echo", "b/#", "-n", "1"); code != 2 {
		t.Errorf("--echo with a wildcard: exit %d, want 2", code)
	}
}
